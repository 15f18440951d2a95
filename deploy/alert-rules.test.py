# Writes deploy/alert-rules.test.yaml (promtool unit tests of alert-rules.yaml) to stdout:
#   .tools/venv/bin/python deploy/alert-rules.test.py > deploy/alert-rules.test.yaml
# scripts/validate-deploy.sh checks the committed file is this script's output, so edit the cases here.
import yaml, sys
ALL = ["McpToolErrorRatioHigh","McpUnresolvedToolCallsHigh","McpInboundRejectedHigh","McpToolLatencyP99High","McpBreakerNotClosed",
"McpFallbackRatioHigh","McpLoadShedding","McpUpstreamRateLimited","McpRegistryRefreshFailing",
"McpRegistryTierErrors","McpSharedStateRedisErrors","McpToolDefinitionPending","McpToolNameRefused","McpToolListRefused",
"McpBackgroundLoopRestarted","McpConfigReloadRefused","McpGatewayNoTools","McpGatewayScrapeDown","McpGatewayMetricsAbsent"]
ANN = {
 "McpToolErrorRatioHigh": "more than 5% of the tool calls to {s} fail (any error category, circuit_open included)",
 "McpUnresolvedToolCallsHigh": "more than 5% of tool calls name no known tool (the model and the registry disagree)",
 "McpInboundRejectedHigh": "more than 5% of the requests to the gateway are refused before any tool is called",
 "McpToolLatencyP99High": "p99 tool latency on {s} is above 2.5 s (the chat answers in under 3 s)",
 "McpBreakerNotClosed": "the circuit breaker of {s} has not been closed for 5 minutes",
 "McpFallbackRatioHigh": "more than 5% of the calls to {s} are answered by a fallback",
 "McpLoadShedding": "more than 1% of the calls to {s} are shed at its concurrency limit",
 "McpUpstreamRateLimited": "{s} throttles more than 5% of the gateway's attempts",
 "McpRegistryRefreshFailing": "tools/list of {s} has failed for 10 minutes; its tools are served from the last known list",
 "McpRegistryTierErrors": "more than 10% of registry lookups in {t} fail",
 "McpSharedStateRedisErrors": "Redis (shared breakers, registry invalidations) has been failing for 5 minutes",
 "McpToolDefinitionPending": "a tool or prompt definition changed upstream and waits for approval (mcp-gateway registry approve)",
 "McpToolNameRefused": "a server offered another server's tool name and was refused",
 "McpToolListRefused": "the tool list of {s} was refused for going over a bound ({b})",
 "McpBackgroundLoopRestarted": "the gateway's {l} loop panicked and was restarted",
 "McpConfigReloadRefused": "a configuration reload was refused ({g}); the previous configuration stays in force",
 "McpGatewayNoTools": "a gateway has had no tools to offer for 5 minutes",
 "McpGatewayScrapeDown": "a collector cannot scrape its gateway's metrics listener",
 "McpGatewayMetricsAbsent": "no mcp-gateway scrape target reports metrics",
}
SEV = {"McpToolErrorRatioHigh":"page","McpInboundRejectedHigh":"page","McpBreakerNotClosed":"page","McpGatewayNoTools":"page",
       "McpGatewayScrapeDown":"page","McpGatewayMetricsAbsent":"page"}
def alert(name, **labels):
    l = {"severity": SEV.get(name, "warn"), **labels}
    return {"exp_labels": l, "exp_annotations": {"summary": ANN[name].format(
        s=labels.get("server",""), t=labels.get("tier",""), b=labels.get("bound",""), l=labels.get("loop",""), g=labels.get("trigger",""))}}

TOOLS = {"catalog": "manga_search", "checkout": "checkout_cart"}
def calls(server, outcome, values, tool=None):
    tool = tool or TOOLS.get(server, "<unresolved>")
    return {"series": f'mcp_gateway_tool_calls_total{{tool="{tool}",server="{server}",outcome="{outcome}"}}', "values": values}
def s(metric, values, **labels):
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{inner}}}", "values": values}
ZERO = "0x60"
ERRORS = ["upstream_error","upstream_unavailable","upstream_protocol","timeout","rate_limited","circuit_open",
          "overloaded","upstream_misconfigured","upstream_rejected","internal"]
# The caller's own errors: never sent to the server, out of its error ratio (numerator and denominator).
CALLER = ["bad_input","unknown_tool","forbidden","quota_refused","guardrail","unauthenticated","payload_too_large",
          "invalid_request","cancelled","caller_disconnected"]

def healthy(server="catalog", rate=120, exclude=()):
    """A healthy server: answers, pre-initialised zero error series, scrape up, breaker closed."""
    out = [calls(server, "success", f"0+{rate}x60"), calls(server, "tool_error", "0+2x60"),
           calls(server, "cache_hit", "0+10x60")]
    out += [calls(server, o, ZERO) for o in ERRORS + ["fallback_stale","fallback_alternative"] if o not in exclude]
    out += [s("mcp_gateway_upstream_requests_total", f"0+{rate}x60", server=server, transport="http", status="200")]
    if "429" not in exclude:
        out += [s("mcp_gateway_upstream_requests_total", ZERO, server=server, transport="http", status="429")]
    if "breaker" not in exclude:
        out += [s("mcp_gateway_breaker_state", ZERO, server=server)]
    if "shed" not in exclude:
        out += [s("mcp_gateway_load_shed_total", ZERO, server=server)]
    for le in ["0.1", "2.5", "5", "+Inf"]:
        if "latency" not in exclude:
            out += [s("mcp_gateway_tool_call_duration_seconds_bucket", f"0+{rate}x60", tool=TOOLS[server], server=server, le=le)]
    if "latency" not in exclude:
        out += [s("mcp_gateway_tool_call_duration_seconds_count", f"0+{rate}x60", tool=TOOLS[server], server=server)]
    if "refresh" not in exclude:
        # a normal start: two failures while the upstream comes up, then a success every 5 minutes
        out += [s("mcp_gateway_registry_refresh_total", "0 2x59", server=server, outcome="failure"),
                s("mcp_gateway_registry_refresh_total", "0 0 1x4 2x4 3x4 4x4 5x4 6x4 7x4 8x4 9x4 10x4 11x4 12x4", server=server, outcome="success")]
    return out

def gateway_wide(exclude=()):
    out = []
    if "up" not in exclude:
        out.append(s("up", "1x60", job="mcp-gateway", instance="127.0.0.1:9464"))
    if "tools" not in exclude:
        # 0 before the first refresh (a normal start), then the catalogue
        out.append(s("mcp_gateway_registry_tools", "0 6x59", instance="127.0.0.1:9464"))
    if "lookups" not in exclude:
        out += [s("mcp_gateway_registry_lookups_total", "0+50x60", tier="memory", result="hit"),
                s("mcp_gateway_registry_lookups_total", "0+5x60", tier="redis", result="hit"),
                s("mcp_gateway_registry_lookups_total", ZERO, tier="redis", result="error"),
                s("mcp_gateway_registry_lookups_total", "0+1x60", tier="dynamodb", result="hit"),
                s("mcp_gateway_registry_lookups_total", ZERO, tier="dynamodb", result="error")]
    if "shared" not in exclude:
        out.append(s("mcp_gateway_shared_state_errors_total", ZERO, operation="poll"))
    if "requests" not in exclude:
        # inbound messages; no rejection series at all (counters without labels known in advance)
        out += [s("mcp_gateway_requests_total", "0+150x60", method="tools/call"),
                s("mcp_gateway_requests_total", "0+1x60", method="ping"),
                s("mcp_gateway_requests_total", "0+0.2x60", method="other")]
    if "refusals" not in exclude:
        out += [s("mcp_gateway_catalogue_refusals_total", ZERO, instance="127.0.0.1:9464", server="catalog", list="tools", bound=b)
                for b in ("count", "definition_bytes", "list_bytes", "pages")]
    if "restarts" not in exclude:
        out += [s("mcp_gateway_background_restarts_total", ZERO, instance="127.0.0.1:9464", loop=l)
                for l in ("refresher", "prober", "policy_reload")]
    if "reloads" not in exclude:
        # an applied reload now and then is normal operation
        out += [s("mcp_gateway_config_reloads_total", "0x30 1x30", instance="127.0.0.1:9464", trigger="signal", outcome="applied")]
        out += [s("mcp_gateway_config_reloads_total", ZERO, instance="127.0.0.1:9464", trigger=t, outcome="invalid")
                for t in ("signal", "watch", "admin")]
    # one unknown tool now and then (a model's typo): under every threshold
    out.append(calls("", "unknown_tool", "0+0.1x60", tool="<unresolved>"))
    return out

def silent(times, names=ALL):
    return [{"eval_time": t, "alertname": n, "exp_alerts": []} for t in times for n in names]

tests = []
# 1. Healthy fleet, including a normal start: nothing fires, ever.
tests.append({"name": "healthy traffic and a normal start: no alert", "interval": "1m",
    "input_series": healthy("catalog") + healthy("checkout", 30) + gateway_wide(),
    "alert_rule_test": silent(["1m", "3m", "6m", "12m", "30m", "59m"])})

# 2. Error ratio: every error category counts; circuit_open (a server fully down) and
#    upstream_misconfigured (a deleted Lambda) page; a quiet server's single failure does not.
ex = ["circuit_open","upstream_misconfigured"]
series = [c for c in healthy("catalog") + healthy("checkout", 30) + gateway_wide() if not any(f'outcome="{o}"' in c["series"] for o in ex)]
series += [calls("catalog", "circuit_open", "0x10 0+100x50"), calls("catalog", "upstream_misconfigured", ZERO),
           calls("checkout", "upstream_misconfigured", "0x10 0+30x50"), calls("checkout", "circuit_open", ZERO),
           calls("legacy", "success", "0+0.05x60", tool="order_status"), calls("legacy", "upstream_error", "0x29 1x3 2x28", tool="order_status")]
tests.append({"name": "error ratio: circuit_open and upstream_misconfigured page, a quiet server's two failures do not",
    "interval": "1m", "input_series": series, "alert_rule_test": [
        {"eval_time": "12m", "alertname": "McpToolErrorRatioHigh", "exp_alerts": []},
        {"eval_time": "25m", "alertname": "McpToolErrorRatioHigh", "exp_alerts": [alert("McpToolErrorRatioHigh", server="catalog"), alert("McpToolErrorRatioHigh", server="checkout")]},
        # legacy (a call every 20 minutes) failed twice at 30m and 33m: its ratio is far above
        # 5% from 30m to 38m, but under the traffic guard
        {"eval_time": "36m", "alertname": "McpToolErrorRatioHigh", "exp_alerts": [alert("McpToolErrorRatioHigh", server="catalog"), alert("McpToolErrorRatioHigh", server="checkout")]}]})
# every other category, one at a time, at 20% of the calls
for cat in [c for c in ERRORS if c not in ex] + ["shared_failure"]:
    series = [c for c in healthy("catalog") + gateway_wide() if f'outcome="{cat}"' not in c["series"]]
    series.append(calls("catalog", cat, "0x10 0+30x50"))
    tests.append({"name": f"error ratio counts {cat}", "interval": "1m", "input_series": series, "alert_rule_test": [
        {"eval_time": "9m", "alertname": "McpToolErrorRatioHigh", "exp_alerts": []},
        {"eval_time": "25m", "alertname": "McpToolErrorRatioHigh", "exp_alerts": [alert("McpToolErrorRatioHigh", server="catalog")]}]})
# the caller's own errors, all at once and far above 5% of the calls: the server is healthy
series = healthy("catalog") + gateway_wide()
series += [calls("catalog", cat, "0x10 0+40x50") for cat in CALLER]
tests.append({"name": "error ratio leaves out the caller's own errors", "interval": "1m", "input_series": series,
    "alert_rule_test": [{"eval_time": t, "alertname": "McpToolErrorRatioHigh", "exp_alerts": []} for t in ("15m", "25m", "45m")]})

# 3. Unresolved tools
series = [c for c in healthy("catalog") + gateway_wide() if 'server=""' not in c["series"]]
series.append(calls("", "unknown_tool", "0x10 0+30x50", tool="<unresolved>"))
tests.append({"name": "unknown tools at 20% of calls", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "15m", "alertname": "McpUnresolvedToolCallsHigh", "exp_alerts": []},
    {"eval_time": "30m", "alertname": "McpUnresolvedToolCallsHigh", "exp_alerts": [alert("McpUnresolvedToolCallsHigh")]}]})

# 3b. Requests refused before any tool call: an orchestrator upgraded to a protocol version
#     the gateway does not speak.
series = healthy("catalog") + gateway_wide(exclude=("requests",))
series += [s("mcp_gateway_requests_total", "0+150x10 1500x50", method="tools/call"),
           s("mcp_gateway_http_rejections_total", "0x10 0+150x50", reason="unsupported_protocol_version")]
tests.append({"name": "every request refused at the door", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "12m", "alertname": "McpInboundRejectedHigh", "exp_alerts": []},
    {"eval_time": "25m", "alertname": "McpInboundRejectedHigh", "exp_alerts": [alert("McpInboundRejectedHigh")]}]})
# and a few parse errors among healthy traffic stay silent
series = healthy("catalog") + gateway_wide()
series += [s("mcp_gateway_http_rejections_total", "0x10 0+2x50", reason="parse_error")]
tests.append({"name": "a few refused requests", "interval": "1m", "input_series": series,
    "alert_rule_test": silent(["20m", "40m"], ["McpInboundRejectedHigh"])})

# 4. Latency
series = healthy("catalog", exclude=("latency",)) + gateway_wide()
for le, v in [("0.1", "0+120x10 1200x50"), ("2.5", "0+120x10 1200x50"), ("5", "0+120x60"), ("+Inf", "0+120x60")]:
    series.append(s("mcp_gateway_tool_call_duration_seconds_bucket", v, tool="manga_search", server="catalog", le=le))
series.append(s("mcp_gateway_tool_call_duration_seconds_count", "0+120x60", tool="manga_search", server="catalog"))
tests.append({"name": "p99 latency above 2.5 s", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "18m", "alertname": "McpToolLatencyP99High", "exp_alerts": []},
    {"eval_time": "30m", "alertname": "McpToolLatencyP99High", "exp_alerts": [alert("McpToolLatencyP99High", server="catalog")]}]})

# 5. Breaker: open for good pages, a two-minute open does not.
series = healthy("catalog", exclude=("breaker",)) + healthy("checkout", 30, exclude=("breaker",)) + gateway_wide()
series += [s("mcp_gateway_breaker_state", "0x9 1 2 1 2 1 2 1 1 1 2x40", server="catalog"),
           s("mcp_gateway_breaker_state", "0x9 1 2 0x48", server="checkout")]
tests.append({"name": "breaker open/half-open for good pages; a short open does not", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "13m", "alertname": "McpBreakerNotClosed", "exp_alerts": []},
    {"eval_time": "20m", "alertname": "McpBreakerNotClosed", "exp_alerts": [alert("McpBreakerNotClosed", server="catalog")]}]})

# 6. Fallbacks
series = [c for c in healthy("catalog") + gateway_wide() if 'outcome="fallback_stale"' not in c["series"]]
series.append(calls("catalog", "fallback_stale", "0x10 0+30x50"))
tests.append({"name": "stale fallbacks at 20% of calls", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "15m", "alertname": "McpFallbackRatioHigh", "exp_alerts": []},
    {"eval_time": "30m", "alertname": "McpFallbackRatioHigh", "exp_alerts": [alert("McpFallbackRatioHigh", server="catalog")]},
    {"eval_time": "30m", "alertname": "McpToolErrorRatioHigh", "exp_alerts": []}]})

# 7. Load shedding
series = [c for c in healthy("catalog", exclude=("shed",)) + gateway_wide() if 'outcome="overloaded"' not in c["series"]]
series += [s("mcp_gateway_load_shed_total", "0x10 0+12x50", server="catalog"), calls("catalog", "overloaded", "0x10 0+12x50")]
tests.append({"name": "shedding 10% of calls", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "10m", "alertname": "McpLoadShedding", "exp_alerts": []},
    {"eval_time": "25m", "alertname": "McpLoadShedding", "exp_alerts": [alert("McpLoadShedding", server="catalog")]}]})

# 8. Rate limiting as a ratio: 20% of attempts throttled fires; the same absolute rate on a
#    busy server (under 5%) does not.
series = healthy("catalog", exclude=("429",)) + healthy("checkout", 3000, exclude=("429",)) + gateway_wide()
series += [s("mcp_gateway_upstream_requests_total", "0x10 0+30x50", server="catalog", transport="http", status="429"),
           s("mcp_gateway_upstream_requests_total", "0x10 0+30x50", server="checkout", transport="http", status="429")]
tests.append({"name": "throttling as a share of attempts", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "10m", "alertname": "McpUpstreamRateLimited", "exp_alerts": []},
    {"eval_time": "25m", "alertname": "McpUpstreamRateLimited", "exp_alerts": [alert("McpUpstreamRateLimited", server="catalog")]}]})

# 9. Refresh failing: outage after a normal start fires; the registry scan (server="dynamodb")
#    failing every refresh fires too.
series = healthy("catalog", exclude=("refresh",)) + healthy("checkout", 30) + gateway_wide()
series += [s("mcp_gateway_registry_refresh_total", "0 0 0x10 1+1x47", server="catalog", outcome="failure"),
           s("mcp_gateway_registry_refresh_total", "0 1 1x10 1x47", server="catalog", outcome="success"),
           s("mcp_gateway_registry_refresh_total", "0 1x4 2x4 3x4 4x4 5x4 6x4 7x4 8x4 9x4 10x4 11x4 12x4", server="dynamodb", outcome="failure"),
           s("mcp_gateway_registry_refresh_total", "0x60", server="dynamodb", outcome="success")]
tests.append({"name": "tools/list failing for good", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "4m", "alertname": "McpRegistryRefreshFailing", "exp_alerts": []},
    {"eval_time": "30m", "alertname": "McpRegistryRefreshFailing", "exp_alerts": [alert("McpRegistryRefreshFailing", server="catalog"), alert("McpRegistryRefreshFailing", server="dynamodb")]}]})
# and a start where the failure series appears without a zero sample (no pre-initialisation)
series = healthy("catalog", exclude=("refresh",)) + gateway_wide()
series += [s("mcp_gateway_registry_refresh_total", "_ 3 3x58", server="catalog", outcome="failure"),
           s("mcp_gateway_registry_refresh_total", "_ _ 1 1x3 2x4 3x4 4x4 5x4 6x4 7x4 8x4 9x4 10x4 11x4 12x3", server="catalog", outcome="success")]
tests.append({"name": "a normal start with failures before the first success stays silent", "interval": "1m", "input_series": series,
    "alert_rule_test": silent(["2m", "7m", "12m", "40m"], ["McpRegistryRefreshFailing"])})

# 10. Registry tier errors: DynamoDB failing half its lookups fires; one Redis error among
#     a handful of lookups (under the traffic guard) does not.
series = gateway_wide(exclude=("lookups",)) + healthy("catalog")
series += [s("mcp_gateway_registry_lookups_total", "0+50x60", tier="memory", result="hit"),
           s("mcp_gateway_registry_lookups_total", "0+5x60", tier="dynamodb", result="hit"),
           s("mcp_gateway_registry_lookups_total", "0x10 0+5x50", tier="dynamodb", result="error"),
           s("mcp_gateway_registry_lookups_total", "0+0.5x60", tier="redis", result="hit"),
           s("mcp_gateway_registry_lookups_total", "0x20 1x40", tier="redis", result="error")]
tests.append({"name": "DynamoDB lookups failing", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "12m", "alertname": "McpRegistryTierErrors", "exp_alerts": []},
    {"eval_time": "25m", "alertname": "McpRegistryTierErrors", "exp_alerts": [alert("McpRegistryTierErrors", tier="dynamodb")]}]})

# 11. Redis for shared state unreachable for good fires; a blip does not.
series = gateway_wide(exclude=("shared",)) + healthy("catalog")
series += [s("mcp_gateway_shared_state_errors_total", "0x10 0+300x50", operation="poll"),
           s("mcp_gateway_shared_state_errors_total", "0x5 4x55", operation="publish")]
tests.append({"name": "Redis unreachable", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "10m", "alertname": "McpSharedStateRedisErrors", "exp_alerts": []},
    {"eval_time": "25m", "alertname": "McpSharedStateRedisErrors", "exp_alerts": [alert("McpSharedStateRedisErrors")]}]})
series = gateway_wide(exclude=("shared",)) + healthy("catalog")
series += [s("mcp_gateway_shared_state_errors_total", "0x10 3x50", operation="connect")]
tests.append({"name": "one Redis blip", "interval": "1m", "input_series": series,
    "alert_rule_test": silent(["12m", "16m", "30m"], ["McpSharedStateRedisErrors"])})

# 12. No tools
series = gateway_wide(exclude=("tools",)) + healthy("catalog")
# Catalogue trust: a pending definition change and a refused name warn; a name kept by its
# holder (the newcomer namespaced) does not.
series = healthy("catalog") + gateway_wide()
series += [s("mcp_gateway_tool_definitions_pending", "0x10 1x10 0x40", instance="127.0.0.1:9464"),
           s("mcp_gateway_prompt_definitions_pending", "0x30 1x10 0x20", instance="127.0.0.1:9464"),
           s("mcp_gateway_tool_name_collisions", "0x30 1x30", instance="127.0.0.1:9464", kind="alias_of_another_server"),
           s("mcp_gateway_tool_name_collisions", "1x60", instance="127.0.0.1:9464", kind="name_held")]
tests.append({"name": "a pending definition change and a refused tool name", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "5m", "alertname": "McpToolDefinitionPending", "exp_alerts": []},
    {"eval_time": "5m", "alertname": "McpToolNameRefused", "exp_alerts": []},
    {"eval_time": "15m", "alertname": "McpToolDefinitionPending", "exp_alerts": [alert("McpToolDefinitionPending", instance="127.0.0.1:9464")]},
    {"eval_time": "25m", "alertname": "McpToolDefinitionPending", "exp_alerts": []},
    {"eval_time": "35m", "alertname": "McpToolDefinitionPending", "exp_alerts": [alert("McpToolDefinitionPending", instance="127.0.0.1:9464")]},
    {"eval_time": "45m", "alertname": "McpToolDefinitionPending", "exp_alerts": []},
    {"eval_time": "40m", "alertname": "McpToolNameRefused", "exp_alerts": [alert("McpToolNameRefused", instance="127.0.0.1:9464")]}]})

series.append(s("mcp_gateway_registry_tools", "0 6x9 0x50", instance="127.0.0.1:9464", aws_ecs_task_id="abc"))
tests.append({"name": "a gateway loses every tool", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "12m", "alertname": "McpGatewayNoTools", "exp_alerts": []},
    {"eval_time": "20m", "alertname": "McpGatewayNoTools", "exp_alerts": [{**alert("McpGatewayNoTools"), "exp_labels": {"severity": "page", "instance": "127.0.0.1:9464", "aws_ecs_task_id": "abc"}}]}]})

# 12b. A tool list refused over a bound, and a background loop restarted: each warns while it is
#      recent (10 minutes), then stops.
series = gateway_wide(exclude=("refusals", "restarts")) + healthy("catalog")
series += [s("mcp_gateway_catalogue_refusals_total", "0x10 1x50", instance="127.0.0.1:9464", server="catalog", list="tools", bound="count"),
           s("mcp_gateway_catalogue_refusals_total", ZERO, instance="127.0.0.1:9464", server="catalog", list="tools", bound="pages"),
           s("mcp_gateway_background_restarts_total", "0x20 1x40", instance="127.0.0.1:9464", loop="prober"),
           s("mcp_gateway_background_restarts_total", ZERO, instance="127.0.0.1:9464", loop="refresher")]
tests.append({"name": "a tool list refused over a bound; a background loop restarted", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "5m", "alertname": "McpToolListRefused", "exp_alerts": []},
    {"eval_time": "12m", "alertname": "McpToolListRefused", "exp_alerts": [alert("McpToolListRefused", instance="127.0.0.1:9464", server="catalog", bound="count")]},
    {"eval_time": "30m", "alertname": "McpToolListRefused", "exp_alerts": []},
    {"eval_time": "15m", "alertname": "McpBackgroundLoopRestarted", "exp_alerts": []},
    {"eval_time": "22m", "alertname": "McpBackgroundLoopRestarted", "exp_alerts": [alert("McpBackgroundLoopRestarted", instance="127.0.0.1:9464", loop="prober")]},
    {"eval_time": "40m", "alertname": "McpBackgroundLoopRestarted", "exp_alerts": []}]})

# 12b. A refused configuration reload warns while it is recent (10 minutes); applied ones never.
series = gateway_wide(exclude=("reloads",)) + healthy("catalog")
series += [s("mcp_gateway_config_reloads_total", "0x10 1 2x49", instance="127.0.0.1:9464", trigger="signal", outcome="applied"),
           s("mcp_gateway_config_reloads_total", "0x20 1x40", instance="127.0.0.1:9464", trigger="watch", outcome="invalid"),
           s("mcp_gateway_config_reloads_total", ZERO, instance="127.0.0.1:9464", trigger="signal", outcome="invalid")]
tests.append({"name": "a configuration reload refused", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "15m", "alertname": "McpConfigReloadRefused", "exp_alerts": []},
    {"eval_time": "22m", "alertname": "McpConfigReloadRefused", "exp_alerts": [alert("McpConfigReloadRefused", instance="127.0.0.1:9464", trigger="watch")]},
    {"eval_time": "40m", "alertname": "McpConfigReloadRefused", "exp_alerts": []}]})

# 13. Scrape target down; one missed scrape does not page.
series = gateway_wide(exclude=("up",)) + healthy("catalog")
series += [s("up", "1x10 0x50", job="mcp-gateway", instance="127.0.0.1:9464", aws_ecs_task_id="abc"),
           s("up", "1x10 0 1x49", job="mcp-gateway", instance="127.0.0.1:9464", aws_ecs_task_id="def")]
tests.append({"name": "gateway metrics listener down", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "11m", "alertname": "McpGatewayScrapeDown", "exp_alerts": []},
    {"eval_time": "15m", "alertname": "McpGatewayScrapeDown", "exp_alerts": [{**alert("McpGatewayScrapeDown"), "exp_labels": {"severity": "page", "job": "mcp-gateway", "instance": "127.0.0.1:9464", "aws_ecs_task_id": "abc"}}]}]})

# 14. No target at all
series = gateway_wide(exclude=("up",))
tests.append({"name": "no gateway reports", "interval": "1m", "input_series": series, "alert_rule_test": [
    {"eval_time": "3m", "alertname": "McpGatewayMetricsAbsent", "exp_alerts": []},
    {"eval_time": "10m", "alertname": "McpGatewayMetricsAbsent", "exp_alerts": [{**alert("McpGatewayMetricsAbsent"), "exp_labels": {"severity": "page", "job": "mcp-gateway"}}]}]})

doc = {"rule_files": ["alert-rules.yaml"], "evaluation_interval": "1m", "tests": tests}
head = ("# promtool unit tests of alert-rules.yaml: `promtool test rules deploy/alert-rules.test.yaml`\n"
        "# (run by scripts/validate-deploy.sh; generated by alert-rules.test.py). Each rule fires on an outage and stays silent on\n"
        "# healthy traffic, including a normal start; the first test checks every rule on a healthy\n"
        "# fleet. Series start at 0 because the gateway pre-creates them.\n")
sys.stdout.write(head + yaml.safe_dump(doc, sort_keys=False, width=200, allow_unicode=True))
