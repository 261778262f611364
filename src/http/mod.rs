//! The HTTP wiring: the whole application of `cardhour serve` ([`server`]: the JSON API and the portal's pages under
//! one set of layers, `/metrics` and the probes beside them) and a worker's monitoring port ([`monitoring`]). The
//! top floor of the HTTP side: it composes the faces ([`crate::api`], [`crate::web`]), which stand on the state in
//! [`crate::usecase::state`] and never on this.

pub mod monitoring;
pub mod server;
