//! The integration tests, as one test binary: each module is one concern, tested against the
//! built `mcp-gateway` binary and real peers on loopback (`common` is the harness they share).
//! One binary links the crate and its AWS SDKs once instead of once per file, which is most of
//! what building the tests costs. Run one concern with `cargo test --test suite MODULE::`.

mod common;

mod agentcore_lambda;
mod breaker_recovery;
mod capabilities;
mod catalogue_bounds;
mod catalogue_control;
mod catalogue_scale;
mod catalogue_trust;
mod config_env;
mod conformance_client;
mod conformance_server;
mod console;
mod console_browser;
mod era_probe;
mod exposure;
mod federation;
mod golden;
mod grafana_dashboard;
mod hostile_upstream;
mod http_upstream;
mod identity_policy;
mod inbound;
mod inbound_bounds;
mod inbound_cancel;
mod lambda;
mod list_changes;
mod mrtr;
mod one_door;
mod openapi;
mod openapi_peers;
mod openapi_scale;
mod ops_metric_series;
mod ops_probe_metrics;
mod ops_readiness;
mod otel_tracing;
mod ownership;
mod progress_relay;
mod quotas_audit;
mod redis_tls_cluster;
mod registry;
mod registry_pressure;
mod resilience;
mod sampling_relay;
mod shared_breakers;
mod single_flight;
mod sse_resume;
mod stdio_registry;
mod stdio_upstream;
mod stuck_log_pipe;
mod supervision;
mod tasks;
mod third_party;
mod tool_export;
mod trust_boundaries;
mod upstream_contract;
mod upstream_credentials;
mod upstream_trust;
mod ws_sse_connectors;
mod ws_sse_upstream;
