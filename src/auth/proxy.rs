//! Single sign-on behind an authenticating proxy (e.g. oauth2-proxy): the user and its groups from configured
//! headers, believed only when the connection's peer address (never `X-Forwarded-For`) is a configured proxy
//! address, the groups mapped to a role and teams on every request — so a change of groups at the identity
//! provider takes effect at the next request.
//!
//! Highest role wins (admin > finance > viewer > team lead); a team lead gets the union of its groups' teams. The
//! portal's session still carries the CSRF token of the forms: it is bound to the proxy's user, and a request
//! naming another user than the session's gets a new session (new id, new token) first.

use std::net::IpAddr;

use axum::http::{HeaderMap, HeaderName};
use ipnet::IpNet;

use crate::access::{Credential, Principal, Role};

/// The headers oauth2-proxy sets with `--pass-user-headers` (`--set-xauthrequest` sets `X-Auth-Request-*`).
pub const DEFAULT_USER_HEADER: &str = "x-forwarded-user";
pub const DEFAULT_GROUPS_HEADER: &str = "x-forwarded-groups";

/// The longest user name believed from the header (as a portal user's name may be).
const USER_MAX: usize = 200;

/// What one group of the identity provider grants: a role, and for a team lead its team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupGrant {
    pub group: String,
    pub role: Role,
    /// Set for `team_lead`.
    pub team: Option<String>,
}

impl GroupGrant {
    /// `GROUP=ROLE` or `GROUP=team_lead:TEAM` (e.g. `finance-team=finance`, `ml-vision=team_lead:vision`).
    pub fn parse(s: &str) -> Result<GroupGrant, String> {
        let usage =
            || format!("`{}`: use GROUP=ROLE or GROUP=team_lead:TEAM (roles admin, finance, viewer)", s.escape_debug());
        let (group, grant) = s.split_once('=').ok_or_else(usage)?;
        let group = group.trim();
        if group.is_empty() || group.chars().any(char::is_control) {
            return Err(usage());
        }
        let (role, team) = match grant.trim().split_once(':') {
            Some((role, team)) => (role, Some(team.trim())),
            None => (grant.trim(), None),
        };
        let role = Role::parse(role.trim()).ok_or_else(usage)?;
        let team = match (role, team) {
            (Role::TeamLead, Some(team)) => Some(
                crate::validate::TeamId::parse("team", team)
                    .map_err(|e| format!("{}: {}", usage(), e.message))?
                    .into_string(),
            ),
            (Role::TeamLead, None) => return Err(format!("{}: a team lead needs its team", usage())),
            (_, Some(_)) => return Err(format!("{}: only team_lead takes a team", usage())),
            (_, None) => None,
        };
        Ok(GroupGrant { group: group.to_string(), role, team })
    }
}

/// An address or network the proxy connects from: `10.0.0.5`, `10.0.0.0/24`, `::1`, `fd00::/8`.
pub fn parse_trusted(s: &str) -> Result<IpNet, String> {
    let s = s.trim();
    s.parse::<IpNet>().or_else(|_| s.parse::<IpAddr>().map(IpNet::from)).map_err(|_| {
        format!("`{}` is not an IP address or network (e.g. 10.0.0.5, 10.0.0.0/24, ::1)", s.escape_debug())
    })
}

/// How the portal believes an authenticating proxy.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    pub user_header: HeaderName,
    pub groups_header: HeaderName,
    /// The proxy's addresses: the only peers whose headers are believed.
    pub trusted: Vec<IpNet>,
    pub grants: Vec<GroupGrant>,
    /// Where logging out sends the browser (the proxy's sign-out, e.g. `/oauth2/sign_out`).
    pub sign_out_url: Option<String>,
}

impl ProxyConfig {
    /// Whether a connection from `peer` is one of the proxy's. An IPv4 peer seen on an IPv6 socket
    /// (`::ffff:10.0.0.5`) is its IPv4 address.
    pub fn trusts(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.trusted.iter().any(|net| net.contains(&peer))
    }

    /// The role and teams `groups` grant: the highest role, and for a team lead the union of its groups' teams;
    /// `None` when no group grants anything.
    pub fn grant(&self, groups: &[String]) -> Option<(Role, Vec<String>)> {
        let granted: Vec<&GroupGrant> = self.grants.iter().filter(|g| groups.contains(&g.group)).collect();
        let role = granted.iter().map(|g| g.role).max_by_key(|r| rank(*r))?;
        let mut teams: Vec<String> =
            if role == Role::TeamLead { granted.iter().filter_map(|g| g.team.clone()).collect() } else { Vec::new() };
        teams.sort();
        teams.dedup();
        Some((role, teams))
    }

    /// Who the proxy says a request of `peer` comes from.
    pub fn identify(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Identity {
        // UTF-8, not only visible ASCII: a name may be written in any script
        let text = |v: &axum::http::HeaderValue| std::str::from_utf8(v.as_bytes()).ok().map(str::to_string);
        let sent = headers.contains_key(&self.user_header);
        let trusted = peer.is_some_and(|p| self.trusts(p));
        if !sent {
            return Identity::Anonymous;
        }
        if !trusted {
            return Identity::Untrusted;
        }
        // one user, in visible text: two headers, a control character or an empty name is not a user
        let names: Vec<Option<String>> = headers.get_all(&self.user_header).iter().map(text).collect();
        let user = match names.as_slice() {
            [Some(one)] => one.trim(),
            _ => return Identity::Malformed,
        };
        // the rule every name typed into the API follows (no control, bidi or invisible character, not blank, not
        // too long): a name that displays as something else is nobody
        if crate::validate::text("user", user, USER_MAX).is_err() {
            return Identity::Malformed;
        }
        let groups: Vec<String> = headers
            .get_all(&self.groups_header)
            .iter()
            .filter_map(text)
            .flat_map(|v| v.split(',').map(|g| g.trim().to_string()).collect::<Vec<_>>())
            .filter(|g| !g.is_empty())
            .collect();
        match self.grant(&groups) {
            Some((role, teams)) => {
                Identity::User(Principal { credential: Credential::Proxy, name: user.to_string(), role, teams })
            }
            None => Identity::NoRole { user: user.to_string() },
        }
    }
}

/// Admin above finance above viewer above team lead.
fn rank(r: Role) -> u8 {
    match r {
        Role::Admin => 3,
        Role::Finance => 2,
        Role::Viewer => 1,
        Role::TeamLead => 0,
    }
}

/// What the proxy's headers say of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// A user whose groups grant a role.
    User(Principal),
    /// A user the proxy signed in whose groups grant nothing here.
    NoRole { user: String },
    /// No user header: the request did not come through the proxy's sign-in.
    Anonymous,
    /// A user header from an address that is not the proxy's: never believed.
    Untrusted,
    /// A user header from the proxy that names no one user (empty, repeated, control characters, too long).
    Malformed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn config(trusted: &[&str], grants: &[&str]) -> ProxyConfig {
        ProxyConfig {
            user_header: HeaderName::from_static(DEFAULT_USER_HEADER),
            groups_header: HeaderName::from_static(DEFAULT_GROUPS_HEADER),
            trusted: trusted.iter().map(|t| parse_trusted(t).unwrap()).collect(),
            grants: grants.iter().map(|g| GroupGrant::parse(g).unwrap()).collect(),
            sign_out_url: None,
        }
    }

    fn headers(user: Option<&str>, groups: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(u) = user {
            h.insert(DEFAULT_USER_HEADER, HeaderValue::from_str(u).unwrap());
        }
        for g in groups {
            h.append(DEFAULT_GROUPS_HEADER, HeaderValue::from_str(g).unwrap());
        }
        h
    }

    #[test]
    fn grants_parse_or_say_why_not() {
        assert_eq!(
            GroupGrant::parse("ml-vision=team_lead:vision").unwrap(),
            GroupGrant { group: "ml-vision".into(), role: Role::TeamLead, team: Some("vision".into()) }
        );
        assert_eq!(GroupGrant::parse(" finance-team = finance ").unwrap().role, Role::Finance);
        for bad in ["finance", "=finance", "x=boss", "x=team_lead", "x=finance:vision", "x=team_lead:Bad Team"] {
            assert!(GroupGrant::parse(bad).is_err(), "{bad}");
        }
        assert!(parse_trusted("10.0.0.0/24").is_ok() && parse_trusted("::1").is_ok());
        assert!(parse_trusted("10.0.0.0/33").is_err() && parse_trusted("proxy.local").is_err());
    }

    #[test]
    fn the_highest_role_wins_and_leads_get_all_their_teams() {
        let c = config(
            &["127.0.0.1"],
            &["ml-vision=team_lead:vision", "ml-nlp=team_lead:nlp", "fin=finance", "all=viewer"],
        );
        let g = |gs: &[&str]| c.grant(&gs.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(g(&["ml-nlp", "ml-vision", "other"]), Some((Role::TeamLead, vec!["nlp".into(), "vision".into()])));
        assert_eq!(g(&["ml-vision", "all"]), Some((Role::Viewer, vec![])));
        assert_eq!(g(&["all", "fin", "ml-nlp"]), Some((Role::Finance, vec![])));
        assert_eq!(g(&["other"]), None);
        assert_eq!(g(&[]), None);
    }

    #[test]
    fn headers_are_believed_only_from_the_proxy() {
        let c = config(&["10.0.0.0/24", "::1"], &["fin=finance"]);
        let proxy: IpAddr = "10.0.0.7".parse().unwrap();
        let h = headers(Some("wang@example.com"), &["other, fin"]);
        match c.identify(Some(proxy), &h) {
            Identity::User(p) => assert_eq!(
                (p.name.as_str(), p.role, p.actor()),
                ("wang@example.com", Role::Finance, "sso:wang@example.com".into())
            ),
            other => panic!("{other:?}"),
        }
        // the same address on an IPv6 socket
        assert!(matches!(c.identify(Some("::ffff:10.0.0.7".parse().unwrap()), &h), Identity::User(_)));
        // another address, or none: never that user, whatever X-Forwarded-For says
        let mut spoofed = h.clone();
        spoofed.insert("x-forwarded-for", HeaderValue::from_static("10.0.0.7"));
        assert_eq!(c.identify(Some("192.168.1.9".parse().unwrap()), &spoofed), Identity::Untrusted);
        assert_eq!(c.identify(None, &h), Identity::Untrusted);
        assert_eq!(c.identify(Some(proxy), &headers(None, &["fin"])), Identity::Anonymous);
        assert_eq!(c.identify(Some(proxy), &headers(Some("li"), &["nobody"])), Identity::NoRole { user: "li".into() });
        assert_eq!(c.identify(Some(proxy), &headers(Some("  "), &["fin"])), Identity::Malformed);
        let mut two = headers(Some("a"), &["fin"]);
        two.append(DEFAULT_USER_HEADER, HeaderValue::from_static("b"));
        assert_eq!(c.identify(Some(proxy), &two), Identity::Malformed);
        // the API's rule for names: no bidi control (U+202E shows "gpj.exe" as "exe.jpg"), no invisible character
        for bad in ["evil\u{202E}gpj.exe", "\u{2066}wang", "wang\u{200F}", "wang\u{FEFF}", "a\u{2028}b"] {
            let mut h = headers(Some("x"), &["fin"]);
            h.insert(DEFAULT_USER_HEADER, HeaderValue::from_bytes(bad.as_bytes()).unwrap());
            assert_eq!(c.identify(Some(proxy), &h), Identity::Malformed, "{bad:?}");
        }
        let mut h = headers(Some("x"), &["fin"]);
        h.insert(DEFAULT_USER_HEADER, HeaderValue::from_bytes("王五".as_bytes()).unwrap());
        assert!(matches!(c.identify(Some(proxy), &h), Identity::User(_)), "any script is a name");
    }
}
