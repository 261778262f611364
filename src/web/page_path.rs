//! Typed path parameters of the pages: `PagePath<Month>`, `PagePath<(Month, TeamId)>` — parsed once by their types;
//! a path whose parameter its type refuses names no page (the not-found page, as for what does not exist).

use axum::extract::FromRequestParts;
use axum::extract::rejection::PathRejection;

use super::layout::PageError;

/// `axum::extract::Path` answering the not-found page when a parameter is refused.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(PathRefused))]
pub struct PagePath<T>(pub T);

/// A path parameter its type refused.
pub struct PathRefused(PathRejection);

impl From<PathRejection> for PathRefused {
    fn from(r: PathRejection) -> Self {
        PathRefused(r)
    }
}

impl axum::response::IntoResponse for PathRefused {
    fn into_response(self) -> axum::response::Response {
        if let PathRejection::MissingPathParams(e) = &self.0 {
            // a route wired to the wrong extractor, not a caller's typo
            return PageError::Internal(e.to_string()).into_response();
        }
        PageError::NotFound.into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::billing::Month;
    use crate::validate::TeamId;

    async fn status<T: serde::de::DeserializeOwned + Send + 'static>(route: &str, uri: &str) -> u16 {
        use tower::ServiceExt;
        let app = axum::Router::new().route(route, axum::routing::get(|PagePath(_): PagePath<T>| async { "ok" }));
        let req = axum::http::Request::get(uri).body(axum::body::Body::empty()).unwrap();
        app.oneshot(req).await.unwrap().status().as_u16()
    }

    #[tokio::test]
    async fn a_refused_parameter_is_the_not_found_page() {
        assert_eq!(status::<Month>("/bills/{month}", "/bills/2026-11").await, 200);
        for bad in ["0000-01", "2101-01", "2026-13", "november"] {
            assert_eq!(status::<Month>("/bills/{month}", &format!("/bills/{bad}")).await, 404, "{bad}");
        }
        let route = "/bills/{month}/teams/{team}";
        assert_eq!(status::<(Month, TeamId)>(route, "/bills/2026-11/teams/nlp").await, 200);
        assert_eq!(status::<(Month, TeamId)>(route, "/bills/2026-11/teams/NLP").await, 404);
    }
}
