//! The integration tests, one test binary: every `tests/*.rs` file is a module of it (their shared harness is
//! `tests/common/`, `use crate::common;` in a file). One binary instead of one per file: the harness and the
//! generic code of the crate's dependencies are compiled and linked once, not seventy times — minutes of CI on two
//! cores. One file's tests: `cargo test --test suite <file>::`, or `cargo nextest run -E 'test(/^<file>::/)'`.

#[path = "common/mod.rs"]
mod common;

#[path = "abuse_api.rs"]
mod abuse_api;
#[path = "abuse_audit.rs"]
mod abuse_audit;
#[path = "abuse_history.rs"]
mod abuse_history;
#[path = "abuse_login.rs"]
mod abuse_login;
#[path = "abuse_pool.rs"]
mod abuse_pool;
#[path = "abuse_slow.rs"]
mod abuse_slow;
#[path = "adjustments.rs"]
mod adjustments;
#[path = "api_access.rs"]
mod api_access;
#[path = "api_contract.rs"]
mod api_contract;
#[path = "api_fuzz.rs"]
mod api_fuzz;
#[path = "api_input.rs"]
mod api_input;
#[path = "api_pages.rs"]
mod api_pages;
#[path = "api_props.rs"]
mod api_props;
#[path = "api_races.rs"]
mod api_races;
#[path = "api_rates.rs"]
mod api_rates;
#[path = "api_teams.rs"]
mod api_teams;
#[path = "backup_restore.rs"]
mod backup_restore;
#[path = "bills_truth.rs"]
mod bills_truth;
#[path = "budgets_on_change.rs"]
mod budgets_on_change;
#[path = "capacity_plan.rs"]
mod capacity_plan;
#[path = "cli_users.rs"]
mod cli_users;
#[path = "close_event.rs"]
mod close_event;
#[path = "close_readiness.rs"]
mod close_readiness;
#[path = "compose_file.rs"]
mod compose_file;
#[path = "db_limits.rs"]
mod db_limits;
#[path = "db_tls.rs"]
mod db_tls;
#[path = "deploy_files.rs"]
mod deploy_files;
#[path = "deploy_kubernetes.rs"]
mod deploy_kubernetes;
#[path = "drafts_exports.rs"]
mod drafts_exports;
#[path = "exactness.rs"]
mod exactness;
#[path = "exactness_regressions.rs"]
mod exactness_regressions;
#[path = "export_pdf.rs"]
mod export_pdf;
#[path = "finance_codes.rs"]
mod finance_codes;
#[path = "frozen_layout.rs"]
mod frozen_layout;
#[path = "ingest_keep.rs"]
mod ingest_keep;
#[path = "ingest_statistics.rs"]
mod ingest_statistics;
#[path = "ingest_truth.rs"]
mod ingest_truth;
#[path = "integrity_db.rs"]
mod integrity_db;
#[path = "ksm_gaps.rs"]
mod ksm_gaps;
#[path = "mapping_import.rs"]
mod mapping_import;
#[path = "metrics_scrape.rs"]
mod metrics_scrape;
#[path = "module_graph.rs"]
mod module_graph;
#[path = "month_end_exports.rs"]
mod month_end_exports;
#[path = "month_end_nodes.rs"]
mod month_end_nodes;
#[path = "offered_capacity.rs"]
mod offered_capacity;
#[path = "openapi_spec.rs"]
mod openapi_spec;
#[path = "oversub_memory.rs"]
mod oversub_memory;
#[path = "pdf_fonts.rs"]
mod pdf_fonts;
#[path = "portal_access_matrix.rs"]
mod portal_access_matrix;
#[path = "portal_admin_pages.rs"]
mod portal_admin_pages;
#[path = "portal_browser_flows.rs"]
mod portal_browser_flows;
#[path = "portal_browser_login.rs"]
mod portal_browser_login;
#[path = "portal_browser_month_end.rs"]
mod portal_browser_month_end;
#[path = "portal_finance_pages.rs"]
mod portal_finance_pages;
#[path = "portal_login.rs"]
mod portal_login;
#[path = "portal_pages.rs"]
mod portal_pages;
#[path = "portal_report_pages.rs"]
mod portal_report_pages;
#[path = "portal_sso.rs"]
mod portal_sso;
#[path = "portal_unit_cost.rs"]
mod portal_unit_cost;
#[path = "prom_faults.rs"]
mod prom_faults;
#[path = "queue_mapping_import.rs"]
mod queue_mapping_import;
#[path = "quota_truth.rs"]
mod quota_truth;
#[path = "remote_read_faults.rs"]
mod remote_read_faults;
#[path = "remote_read_fixtures.rs"]
mod remote_read_fixtures;
#[path = "replica_billing.rs"]
mod replica_billing;
#[path = "reserved_billing.rs"]
mod reserved_billing;
#[path = "serving_truth.rs"]
mod serving_truth;
#[path = "shared_truth.rs"]
mod shared_truth;
#[path = "shutdown.rs"]
mod shutdown;
#[path = "source_auth.rs"]
mod source_auth;
#[path = "statement_layout3.rs"]
mod statement_layout3;
#[path = "statement_unit_cost.rs"]
mod statement_unit_cost;
#[path = "storage_months.rs"]
mod storage_months;
#[path = "team_labels.rs"]
mod team_labels;
#[path = "time_zone.rs"]
mod time_zone;
#[path = "vm_sources.rs"]
mod vm_sources;
#[path = "vm_truth.rs"]
mod vm_truth;
#[path = "worker_budgets.rs"]
mod worker_budgets;
#[path = "worker_faults.rs"]
mod worker_faults;
#[path = "worker_slow_source.rs"]
mod worker_slow_source;
