//! AWS Signature Version 4 for HTTP upstreams behind API Gateway (`execute-api`), Lambda
//! function URLs (`lambda`) or AgentCore Gateway (`bedrock-agentcore`).
//!
//! The signature is the AWS SDK's own (`aws-sigv4`), over the request exactly as it leaves:
//! method, URL, every header the transport set (the `Host` included) and the body, computed in
//! the HTTP client right before sending ([`SignRequest`]). Credentials come from the same
//! chain as the Lambda upstream (`aws-config`'s defaults: environment, profile, web identity,
//! ECS task role, instance metadata), loaded on first use and kept until five minutes before
//! they expire; one resolution at a time.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use aws_credential_types::{
    Credentials as AwsCredentials,
    provider::{ProvideCredentials, SharedCredentialsProvider},
};
use aws_sigv4::{
    http_request::{SignableBody, SignableRequest, SigningSettings, sign},
    sign::v4,
};
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;

use super::CredentialMetrics;
use crate::{
    config::{AwsConfig, DEFAULT_SIGV4_SERVICE, UpstreamAuthConfig},
    upstream::{CredentialFailure, UpstreamError, http::client::SignRequest},
};

/// Credentials are renewed this long before they expire.
const RENEW_BEFORE: Duration = Duration::from_secs(300);

/// The SigV4 signer of one server.
pub struct Signer {
    server: Arc<str>,
    service: Arc<str>,
    region: Option<String>,
    aws: AwsConfig,
    /// The credential chain and region, loaded on first use.
    chain: tokio::sync::OnceCell<(SharedCredentialsProvider, Arc<str>)>,
    /// The signing of the current credentials; replaced when they near expiry.
    current: tokio::sync::Mutex<Option<Arc<Signing>>>,
    metrics: CredentialMetrics,
}

/// Resolved credentials, ready to sign requests.
pub struct Signing {
    identity: Identity,
    expiry: Option<SystemTime>,
    region: Arc<str>,
    service: Arc<str>,
}

impl Signer {
    pub fn new(
        server: Arc<str>,
        auth: &UpstreamAuthConfig,
        aws: &AwsConfig,
        metrics: CredentialMetrics,
    ) -> Self {
        Self {
            server,
            service: auth.service.as_deref().unwrap_or(DEFAULT_SIGV4_SERVICE).into(),
            region: auth.region.clone(),
            aws: aws.clone(),
            chain: tokio::sync::OnceCell::new(),
            current: tokio::sync::Mutex::new(None),
            metrics,
        }
    }

    /// The signing for the current credentials, resolving them when there are none or they
    /// near expiry. Concurrent calls wait for the one resolution under the lock.
    pub async fn signing(&self) -> Result<Arc<Signing>, UpstreamError> {
        let mut current = self.current.lock().await;
        if let Some(signing) = current.as_ref()
            && signing.expiry.is_none_or(|at| SystemTime::now() + RENEW_BEFORE < at)
        {
            return Ok(signing.clone());
        }
        let resolved = self.resolve().await;
        let outcome = match &resolved {
            Ok(_) => "success",
            Err(_) => "unavailable",
        };
        self.metrics.fetch(&self.server, "sigv4", outcome);
        match resolved {
            Ok(signing) => {
                tracing::info!(server = %self.server, service = %self.service, region = %signing.region, "AWS credentials resolved for SigV4");
                *current = Some(signing.clone());
                Ok(signing)
            }
            Err(error) => {
                tracing::warn!(server = %self.server, error = %crate::redact::shown(&error), "cannot resolve AWS credentials for SigV4");
                Err(error)
            }
        }
    }

    async fn resolve(&self) -> Result<Arc<Signing>, UpstreamError> {
        let (provider, region) =
            self.chain
                .get_or_try_init(|| async {
                    let loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
                    let loader = match self.region.as_ref().or(self.aws.region.as_ref()) {
                        Some(region) => loader.region(aws_config::Region::new(region.clone())),
                        None => loader,
                    };
                    let sdk = loader.load().await;
                    let provider =
                        sdk.credentials_provider().ok_or_else(|| unavailable("no AWS credential chain"))?;
                    let region = sdk.region().map(|r| Arc::<str>::from(r.as_ref())).ok_or_else(|| {
                        unavailable("no AWS region for SigV4 (set auth.region or aws.region)")
                    })?;
                    Ok::<_, UpstreamError>((provider, region))
                })
                .await?;
        let credentials: AwsCredentials = provider
            .provide_credentials()
            .await
            .map_err(|e| unavailable(&format!("AWS credentials: {e}")))?;
        Ok(Arc::new(Signing {
            expiry: credentials.expiry(),
            identity: credentials.into(),
            region: region.clone(),
            service: self.service.clone(),
        }))
    }
}

impl SignRequest for Signing {
    fn sign(&self, request: &mut http::Request<Bytes>) -> Result<(), String> {
        let params = v4::SigningParams::builder()
            .identity(&self.identity)
            .region(&self.region)
            .name(&self.service)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| format!("SigV4 parameters: {e}"))?
            .into();
        let uri = request.uri().to_string();
        let instructions = {
            let headers: Vec<(&str, &str)> = request
                .headers()
                .iter()
                .filter_map(|(name, value)| value.to_str().ok().map(|v| (name.as_str(), v)))
                .collect();
            let signable = SignableRequest::new(
                request.method().as_str(),
                &uri,
                headers.into_iter(),
                SignableBody::Bytes(request.body()),
            )
            .map_err(|e| format!("SigV4: {e}"))?;
            let (instructions, _signature) =
                sign(signable, &params).map_err(|e| format!("SigV4: {e}"))?.into_parts();
            instructions
        };
        instructions.apply_to_request_http1x(request);
        for name in ["authorization", "x-amz-security-token"] {
            if let Some(value) = request.headers_mut().get_mut(name) {
                value.set_sensitive(true);
            }
        }
        Ok(())
    }
}

fn unavailable(detail: &str) -> UpstreamError {
    UpstreamError::Credentials { failure: CredentialFailure::Unavailable, detail: detail.into() }
}
