//! The access matrix of the portal: every page and download × every role × the own team, another team and a team
//! that does not exist. Global readers (admin, finance, viewer) open every reading page of every team; a team lead
//! opens its own team's pages and gets, for everything else — another team's pages and downloads, the cluster-wide
//! pages, the pages of writers — the very page a path that exists nowhere gets, byte for byte. Nobody signed in is
//! sent to the login.

use crate::common;

use common::api::{SEED_MONTH, TestApi, seed};
use common::portal::{PASSWORD, TestPortal, visitor};
use sqlx::PgPool;

/// Who may open a page.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Audience {
    /// Every signed-in reader: team leads too (their pages are narrowed to their teams).
    Everyone,
    /// Readers of cluster-wide figures: admin, finance, viewer.
    Global,
    /// Those who change things: admin and finance.
    Writers,
    /// Admins only.
    Admins,
}

/// A page of the matrix: its path (`{team}` and `{month}` filled in per case) and who may open it.
struct Page {
    path: &'static str,
    audience: Audience,
}

const fn page(path: &'static str, audience: Audience) -> Page {
    Page { path, audience }
}

/// Every page and download of the portal that a GET opens.
const PAGES: &[Page] = &[
    page("/", Audience::Everyone),
    page("/?month={month}", Audience::Everyone),
    page("/teams/{team}", Audience::Everyone),
    page("/teams/{team}?month={month}", Audience::Everyone),
    page("/bills", Audience::Everyone),
    page("/bills/{month}", Audience::Everyone),
    page("/bills/{month}/teams/{team}", Audience::Everyone),
    page("/bills/{month}/teams/{team}/bills.csv", Audience::Everyone),
    page("/bills/{month}/teams/{team}/statement.pdf", Audience::Everyone),
    page("/bills/{month}/close", Audience::Writers),
    // month end (issue 33): a draft under another policy, the month's files, the close under a chosen policy,
    // the nodes page (cluster-wide: global readers read and preview, writers save)
    page("/bills/{month}?mode=chargeback&unallocated=spread_proportionally", Audience::Everyone),
    page("/bills/{month}/teams/{team}?mode=chargeback", Audience::Everyone),
    page("/bills/{month}/bills.csv?unallocated=spread_proportionally", Audience::Everyone),
    page("/bills/{month}/statements.pdf", Audience::Everyone),
    page("/bills/{month}/bills.xlsx", Audience::Everyone),
    page("/bills/{month}/close?mode=chargeback&unallocated=spread_proportionally", Audience::Writers),
    page("/nodes", Audience::Global),
    page("/nodes?month={month}", Audience::Global),
    page("/nodes/sim/gpu-node-1?month={month}", Audience::Global),
    page("/idle", Audience::Everyone),
    page("/idle?team={team}", Audience::Everyone),
    page("/health", Audience::Global),
    page("/reports/utilization", Audience::Global),
    page("/reports/utilization?month={month}", Audience::Global),
    page("/reports/tiers?month={month}", Audience::Global),
    page("/reports/ranking?month={month}", Audience::Global),
    page("/reports/low-utilization", Audience::Everyone),
    page("/reports/unit-cost", Audience::Everyone),
    page("/reports/fragmentation", Audience::Global),
    page("/reports/oversubscription", Audience::Global),
    page("/adjustments", Audience::Everyone),
    page("/adjustments?month={month}", Audience::Everyone),
    page("/budgets", Audience::Everyone),
    page("/budgets?month={month}", Audience::Everyone),
    page("/rates", Audience::Everyone),
    page("/rates/new", Audience::Writers),
    page("/admin/teams", Audience::Global),
    page("/admin/teams/{team}", Audience::Writers),
    page("/admin/mappings", Audience::Global),
    page("/admin/queue-mappings", Audience::Global),
    page("/admin/reservation-terms", Audience::Global),
    page("/admin/close-events", Audience::Global),
    page("/admin/audit", Audience::Global),
    page("/admin/users", Audience::Admins),
    page("/admin/users/lead/password", Audience::Admins),
    page("/admin/tokens", Audience::Admins),
];

const ROLES: &[&str] = &["admin", "finance", "viewer", "lead"];

/// Whom a case is about: the lead's own team, another team, a team that does not exist.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Whose {
    Own,
    Other,
    Nonexistent,
}

impl Whose {
    fn team(self) -> &'static str {
        match self {
            Whose::Own => "vision",
            Whose::Other => "nlp",
            Whose::Nonexistent => "ghost-team",
        }
    }
}

/// Whether `role` may open `page` about `whose`'s team.
fn allowed(role: &str, page: &Page, whose: Whose) -> bool {
    let names_a_team = page.path.contains("{team}");
    if names_a_team && whose == Whose::Nonexistent {
        return false;
    }
    match (role, page.audience) {
        ("admin", _) => true,
        ("finance", Audience::Admins) => false,
        ("finance", _) => true,
        ("viewer", Audience::Everyone | Audience::Global) => true,
        ("viewer", _) => false,
        ("lead", Audience::Everyone) => !names_a_team || whose == Whose::Own,
        ("lead", _) => false,
        _ => unreachable!("role {role}"),
    }
}

fn fill(path: &str, whose: Whose) -> String {
    path.replace("{team}", whose.team()).replace("{month}", SEED_MONTH)
}

#[sqlx::test]
async fn every_page_and_download_by_role_and_team(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let portal = TestPortal::start(pool.clone()).await;

    // nobody signed in: the login, with the way back
    let anonymous = visitor();
    let mut anonymous_cases = 0;
    for p in PAGES {
        let path = fill(p.path, Whose::Own);
        let r = anonymous.get(portal.url(&path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 303, "anonymous {path}");
        let to = r.headers()["location"].to_str().unwrap().to_string();
        assert!(to.starts_with("/login?next="), "anonymous {path} → {to}");
        anonymous_cases += 1;
    }
    assert_eq!(anonymous_cases, PAGES.len());

    let mut cases = 0;
    let mut opened = 0;
    let mut refused = 0;
    for role in ROLES {
        let c = visitor();
        assert_eq!(portal.login(&c, role, PASSWORD).await.status, 303, "{role} signs in");
        // the page of a path that exists nowhere, as this user gets it
        let nowhere = c.get(portal.url("/no/such/page")).send().await.unwrap();
        assert_eq!(nowhere.status().as_u16(), 404);
        let not_found = nowhere.text().await.unwrap();
        assert!(!not_found.contains(role), "the not-found page names nobody");
        for p in PAGES {
            let cases_of_page: &[Whose] =
                if p.path.contains("{team}") { &[Whose::Own, Whose::Other, Whose::Nonexistent] } else { &[Whose::Own] };
            for &whose in cases_of_page {
                let path = fill(p.path, whose);
                let r = c.get(portal.url(&path)).send().await.unwrap();
                let status = r.status().as_u16();
                let content_type =
                    r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                let body = r.bytes().await.unwrap();
                cases += 1;
                if allowed(role, p, whose) {
                    assert_eq!(status, 200, "{role} {path}: {}", String::from_utf8_lossy(&body));
                    assert_ne!(body.as_ref(), not_found.as_bytes(), "{role} {path}");
                    let file = path.split('?').next().unwrap_or_default();
                    if file.ends_with(".pdf") {
                        assert!(body.starts_with(b"%PDF-"), "{role} {path}");
                    } else if file.ends_with(".xlsx") {
                        assert!(body.starts_with(b"PK"), "{role} {path}: a zip");
                    } else if file.ends_with(".csv") {
                        let text = String::from_utf8(body.to_vec()).unwrap();
                        assert!(text.lines().count() >= 2, "{role} {path}: a header and lines: {text}");
                        assert!(text.contains(whose.team()), "{role} {path}: {text}");
                    } else {
                        assert!(content_type.starts_with("text/html"), "{role} {path}: {content_type}");
                    }
                    opened += 1;
                } else {
                    assert_eq!(status, 404, "{role} {path}");
                    assert_eq!(body.as_ref(), not_found.as_bytes(), "{role} {path}: the same page as nowhere");
                    refused += 1;
                }
            }
        }
        // a team lead's pages never show another team's name nor the cluster-wide figures
        if *role == "lead" {
            for path in ["/", "/bills", "/idle", &format!("/bills/{SEED_MONTH}")] {
                let page = c.get(portal.url(path)).send().await.unwrap().text().await.unwrap();
                assert!(path == "/bills" || page.contains("vision"), "lead {path} shows its team");
                assert!(!page.contains("nlp"), "lead {path} shows nothing of nlp");
                assert!(!page.contains("/reports/"), "lead {path} links no cluster-wide report");
            }
        }
    }
    // the matrix is what it claims: every role opened and was refused something
    assert!(opened > 3 * PAGES.len(), "opened {opened}");
    assert!(refused > PAGES.len() / 2, "refused {refused}");
    assert_eq!(opened + refused, cases);
}

/// A form of the portal: where it posts, who may send it, and fields a permitted sender's form would carry.
struct Form {
    path: &'static str,
    audience: Audience,
    fields: &'static [(&'static str, &'static str)],
}

const fn form(path: &'static str, audience: Audience, fields: &'static [(&'static str, &'static str)]) -> Form {
    Form { path, audience, fields }
}

/// Every form that writes.
const FORMS: &[Form] = &[
    form(
        "/bills/{month}/close",
        Audience::Writers,
        &[("mode", "chargeback"), ("unallocated", "kept_by_platform"), ("reason", "matrix")],
    ),
    form(
        "/nodes/sim/gpu-node-1",
        Audience::Writers,
        &[("month", "{month}"), ("gpu_model", "NVIDIA L40S"), ("cards", "8"), ("previewed", "x")],
    ),
    form("/budgets", Audience::Writers, &[("month", "{month}"), ("team", "{team}"), ("amount", "1")]),
    form(
        "/rates/manual",
        Audience::Writers,
        &[("gpu_model", "A100-80GB"), ("effective_from", "2026-12-01"), ("rate", "99")],
    ),
    form("/rates/cloud", Audience::Writers, &[("model", "A100-80GB"), ("on_demand", "1")]),
    form("/admin/teams", Audience::Writers, &[("id", "intruders"), ("name", "Intruders"), ("owner", "eve")]),
    form("/admin/teams/{team}", Audience::Writers, &[("name", "Renamed"), ("owner", "eve")]),
    form(
        "/admin/teams/{team}/finance-codes",
        Audience::Writers,
        &[("valid_from", "2026-12-01"), ("cost_centre", "CC-666")],
    ),
    form(
        "/admin/mappings",
        Audience::Writers,
        &[("namespace", "stolen-ns"), ("team_id", "{team}"), ("valid_from", "2026-09-01")],
    ),
    form(
        "/admin/reservation-terms",
        Audience::Writers,
        &[
            ("scope_kind", "cluster_queue"),
            ("scope", "cq-stolen"),
            ("gpu_model", "A100-80GB"),
            ("factor", "0.1"),
            ("valid_from", "2026-09-01"),
        ],
    ),
    form(
        "/admin/close-events",
        Audience::Writers,
        &[("url", "http://127.0.0.1:9/stolen"), ("secret", "stolen-secret-0123456789")],
    ),
    form("/admin/close-events/endpoints/1/deactivate", Audience::Writers, &[]),
    form("/admin/users", Audience::Admins, &[("username", "eve"), ("role", "admin"), ("password", "eve-password-1")]),
    form("/admin/users/finance/disable", Audience::Admins, &[]),
    form("/admin/users/finance/password", Audience::Admins, &[("password", "taken-over-42")]),
    form("/admin/tokens", Audience::Admins, &[("name", "eve"), ("role", "admin")]),
    form("/admin/tokens/1/revoke", Audience::Admins, &[]),
];

/// Everything a form could change, as one digest.
async fn state(pool: &PgPool) -> String {
    let mut all = String::new();
    for table in [
        "teams",
        "namespace_mappings",
        "users",
        "api_tokens",
        "closed_months",
        "audit_log",
        "budgets",
        "rate_versions",
        "cloud_rates",
        "node_settings",
        "close_endpoints",
        "team_finance_codes",
    ] {
        // (a login records itself on the user: not a form's doing)
        let row = "(to_jsonb(t) - 'last_login_at')::text";
        let q = format!("SELECT coalesce(md5(string_agg({row}, '|' ORDER BY {row})), '') FROM {table} t");
        let d: String = sqlx::query_scalar(&q).fetch_one(pool).await.unwrap();
        all.push_str(&format!("{table}:{d};"));
    }
    all
}

#[sqlx::test]
async fn no_form_writes_for_a_role_that_may_not_send_it(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let portal = TestPortal::start(pool.clone()).await;
    let before = state(&pool).await;
    let mut refused = 0;
    for role in ["viewer", "lead", "finance"] {
        let c = visitor();
        assert_eq!(portal.login(&c, role, PASSWORD).await.status, 303);
        let home = c.get(portal.url("/")).send().await.unwrap().text().await.unwrap();
        let csrf = common::portal::hidden(&home, "csrf").expect("the logout form's token");
        for f in FORMS {
            let allowed = match (role, f.audience) {
                ("finance", Audience::Writers) => true,
                ("finance" | "viewer" | "lead", _) => false,
                _ => unreachable!(),
            };
            if allowed {
                continue;
            }
            for whose in [Whose::Own, Whose::Other] {
                let path = fill(f.path, whose);
                let mut fields: Vec<(String, String)> =
                    f.fields.iter().map(|(k, v)| (k.to_string(), fill(v, whose))).collect();
                fields.push(("csrf".into(), csrf.clone()));
                let r = c.post(portal.url(&path)).form(&fields).send().await.unwrap();
                assert_eq!(r.status().as_u16(), 404, "{role} POST {path}");
                refused += 1;
            }
        }
    }
    assert!(refused >= 2 * (2 * FORMS.len() + 4), "refused {refused}");
    assert_eq!(state(&pool).await, before, "a refused form wrote something");

    // the same forms from who may send them do write: the refusals above were about the role, not the fields
    for (role, path) in [("finance", "/admin/teams"), ("admin", "/admin/tokens")] {
        let c = visitor();
        assert_eq!(portal.login(&c, role, PASSWORD).await.status, 303);
        let home = c.get(portal.url("/")).send().await.unwrap().text().await.unwrap();
        let csrf = common::portal::hidden(&home, "csrf").unwrap();
        let f = FORMS.iter().find(|f| f.path == path).unwrap();
        let mut fields: Vec<(String, String)> =
            f.fields.iter().map(|(k, v)| (k.to_string(), fill(v, Whose::Own))).collect();
        fields.push(("csrf".into(), csrf));
        let before = state(&pool).await;
        let r = c.post(portal.url(path)).form(&fields).send().await.unwrap();
        let status = r.status().as_u16();
        assert!(status == 303 || status == 200, "{role} POST {path}: {status} {}", r.text().await.unwrap());
        assert_ne!(state(&pool).await, before, "{role} POST {path} wrote");
    }
}
