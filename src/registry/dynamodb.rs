//! The DynamoDB tier: the source of truth that new MCP servers register their tools in.
//! Point reads for lookups (consistent), a paginated scan of active tools for refreshes,
//! writes for the CLI. SDK retries are off and every call is bounded by a timeout: the
//! caller decides what a failure means (stale-if-error).

use std::time::Duration;

use aws_sdk_dynamodb::{
    Client,
    types::{
        AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    },
};

use super::{TierError, entry::RegistryEntry};

const TIER: &str = "dynamodb";

/// Table name used when none is configured.
pub const DEFAULT_TABLE: &str = "mcp-tool-registry";

fn error(e: impl std::fmt::Display) -> TierError {
    TierError { tier: TIER, reason: e.to_string() }
}

/// A DynamoDB table of registry entries.
#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    timeout: Duration,
    page_size: Option<i32>,
}

impl DynamoStore {
    /// Standard credential/region chain, optional endpoint (DynamoDB Local). `attempts`: how
    /// many times the SDK may try one request (its standard retry strategy: transient
    /// failures and throttling, with backoff). The gateway's registry tier makes one attempt —
    /// a refresh is retried by its own schedule, and a lookup has a caller waiting — while an
    /// operator's `registry …` command retries a connection that closed under it, as the AWS
    /// CLI does.
    pub async fn connect(
        table: &str,
        endpoint: Option<&str>,
        region: Option<&str>,
        timeout: Duration,
        attempts: u32,
    ) -> Self {
        let retry = match attempts {
            0 | 1 => aws_config::retry::RetryConfig::disabled(),
            n => aws_config::retry::RetryConfig::standard().with_max_attempts(n),
        };
        let mut loader =
            aws_config::defaults(aws_config::BehaviorVersion::latest()).retry_config(retry).timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(timeout.min(Duration::from_secs(1)))
                    .operation_attempt_timeout(timeout)
                    .build(),
            );
        if let Some(region) = region {
            loader = loader.region(aws_config::Region::new(region.to_string()));
        }
        if let Some(endpoint) = endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        Self { client: Client::new(&loader.load().await), table: table.to_string(), timeout, page_size: None }
    }

    /// Items per scan page (`None`: DynamoDB's 1 MB pages).
    pub fn with_page_size(mut self, items: u32) -> Self {
        self.page_size = (items > 0).then(|| items.min(i32::MAX as u32) as i32);
        self
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    async fn bounded<T, E: std::error::Error>(
        &self,
        call: impl Future<Output = Result<T, E>>,
    ) -> Result<T, TierError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result.map_err(|e| error(aws_sdk_dynamodb::error::DisplayErrorContext(e))),
            Err(_) => Err(error(format!("no answer within {:?}", self.timeout))),
        }
    }

    /// One tool by name (any status).
    pub async fn get(&self, name: &str) -> Result<Option<RegistryEntry>, TierError> {
        let request = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("tool_name", AttributeValue::S(name.to_string()))
            .consistent_read(true)
            .send();
        let output = self.bounded(request).await?;
        output.item.map(|item| RegistryEntry::from_item(&item).map_err(error)).transpose()
    }

    /// Every active tool, all pages; `on_page` sees the running count (progress).
    pub async fn scan_active(&self, mut on_page: impl FnMut(usize)) -> Result<Vec<RegistryEntry>, TierError> {
        let mut entries = Vec::new();
        let mut start = None;
        loop {
            let request = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression("#s = :active")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":active", AttributeValue::S("active".into()))
                .set_exclusive_start_key(start.take())
                .set_limit(self.page_size)
                .send();
            let page = self.bounded(request).await?;
            for item in page.items() {
                match RegistryEntry::from_item(item) {
                    Ok(entry) => entries.push(entry),
                    Err(reason) => tracing::warn!(reason, "malformed registry item skipped"),
                }
            }
            on_page(entries.len());
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(entries),
            }
        }
    }

    /// Writes an entry, bumping its version and time.
    pub async fn put(&self, mut entry: RegistryEntry) -> Result<RegistryEntry, TierError> {
        let previous = self.get(&entry.tool_name).await?.map(|e| e.version).unwrap_or(0);
        entry.version = previous + 1;
        entry.updated_at = super::entry::now_rfc3339();
        let request = self.client.put_item().table_name(&self.table).set_item(Some(entry.to_item())).send();
        self.bounded(request).await?;
        Ok(entry)
    }

    pub async fn delete(&self, name: &str) -> Result<bool, TierError> {
        let request = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("tool_name", AttributeValue::S(name.to_string()))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
            .send();
        Ok(self.bounded(request).await?.attributes.is_some())
    }

    /// Creates the table (on-demand billing); `Ok(false)` if it already exists.
    pub async fn create_table(&self) -> Result<bool, TierError> {
        let request = self
            .client
            .create_table()
            .table_name(&self.table)
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name("tool_name")
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .map_err(error)?,
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name("tool_name")
                    .key_type(KeyType::Hash)
                    .build()
                    .map_err(error)?,
            )
            .billing_mode(BillingMode::PayPerRequest)
            .send();
        match tokio::time::timeout(self.timeout, request).await {
            Ok(Ok(_)) => Ok(true),
            Ok(Err(e)) if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) => Ok(false),
            Ok(Err(e)) => Err(error(aws_sdk_dynamodb::error::DisplayErrorContext(e))),
            Err(_) => Err(error("create-table timed out")),
        }
    }
}
