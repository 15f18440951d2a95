//! The error table: every failure the gateway answers becomes a JSON-RPC error here, and only
//! here.
//!
//! Failure → category → wire: an upstream's failure ([`UpstreamError`], or its own JSON-RPC
//! error) is given a [`Category`] in [`upstream`]; a failure the gateway makes itself is
//! created with its category at the place it happens; a [`GatewayError`] carries the
//! category and the context of the call (tool, server, attempts, retry hint), and
//! [`GatewayError::to_error_object_for`] derives the code (by protocol revision), message and
//! the machine-readable `error.data` an agent needs to explain the failure to a user. What a
//! failure means for retries and circuit breakers is the outcome classifier's
//! ([`crate::resilience::classify`]); how it is answered is decided here. HTTP statuses stay
//! with the refusal that answers them (an `invalid_request` is a 400, 404, 405 or 408 by
//! where it happens). The README documents the same table.
//!
//! This room imports nothing of the crate: the protocol codec and every room above depend on
//! it, never the other way round.

mod category;
mod object;
pub mod upstream;

pub use category::Category;
pub use object::{ErrorObject, GatewayError};
pub use upstream::{CredentialFailure, FunctionErrorKind, UpstreamError, category_of_reply};
