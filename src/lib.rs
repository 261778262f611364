//! cardhour: GPU FinOps cost accounting — exact GPU-hours and effective GPU-hours from Prometheus, stored in Postgres.

pub mod access;
pub mod api;
pub mod auth;
pub mod billing;
pub mod cli;
pub mod db;
pub mod digest;
pub mod export;
pub mod glossary;
pub mod http;
pub mod ingest;
pub mod ledger;
pub mod metering;
pub mod money;
pub mod pricing;
pub mod prom;
pub mod shutdown;
pub mod simulate;
pub mod telemetry;
pub mod usecase;
pub mod validate;
pub mod waste;
pub mod web;
