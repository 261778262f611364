//! A PromQL vector selector (`metric{a="b",c=~"d"}`) parsed into label matchers, for the sources that take
//! matchers rather than PromQL (remote read, VictoriaMetrics export).

use super::proto::{LabelMatcher, MatchType};

/// Parses `name{label op "value", …}` (name and braces each optional, not both absent). Values are PromQL
/// strings in double or single quotes (with `\"`, `\\`, `\n`, `\t` escapes) or backticks (raw).
pub fn parse(selector: &str) -> Result<Vec<LabelMatcher>, String> {
    let s = selector.trim();
    let bad = |why: &str| format!("selector `{selector}`: {why}");
    let name_end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).unwrap_or(s.len());
    let (name, rest) = s.split_at(name_end);
    let mut out = Vec::new();
    if !name.is_empty() {
        if name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(bad("a metric name cannot start with a digit"));
        }
        out.push(LabelMatcher { r#type: MatchType::Eq as i32, name: "__name__".into(), value: name.into() });
    }
    let rest = rest.trim();
    if rest.is_empty() {
        return if out.is_empty() { Err(bad("empty")) } else { Ok(out) };
    }
    let inner = rest.strip_prefix('{').and_then(|r| r.strip_suffix('}')).ok_or_else(|| bad("expected `{…}`"))?;
    let mut chars = inner.trim_start();
    while !chars.is_empty() {
        let label_end = chars.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(chars.len());
        let (label, after) = chars.split_at(label_end);
        if label.is_empty() || label.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(bad("expected a label name"));
        }
        let after = after.trim_start();
        let (op, after) = [("=~", MatchType::Re), ("!~", MatchType::Nre), ("!=", MatchType::Neq), ("=", MatchType::Eq)]
            .into_iter()
            .find_map(|(tok, op)| after.strip_prefix(tok).map(|a| (op, a)))
            .ok_or_else(|| bad(&format!("expected =, !=, =~ or !~ after `{label}`")))?;
        let (value, after) = string(after.trim_start()).ok_or_else(|| bad(&format!("bad string for `{label}`")))?;
        out.push(LabelMatcher { r#type: op as i32, name: label.into(), value });
        let after = after.trim_start();
        chars = match after.strip_prefix(',') {
            Some(a) => a.trim_start(),
            None if after.is_empty() => after,
            None => return Err(bad("expected `,` between matchers")),
        };
    }
    if out.is_empty() {
        return Err(bad("no matcher"));
    }
    Ok(out)
}

/// A quoted PromQL string at the start of `s`, and what follows it.
fn string(s: &str) -> Option<(String, &str)> {
    let quote = s.chars().next()?;
    let body = &s[1..];
    if quote == '`' {
        let end = body.find('`')?;
        return Some((body[..end].to_string(), &body[end + 1..]));
    }
    if quote != '"' && quote != '\'' {
        return None;
    }
    let mut out = String::new();
    let mut it = body.char_indices();
    while let Some((i, c)) = it.next() {
        match c {
            '\\' => {
                let (_, e) = it.next()?;
                out.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '\\' | '"' | '\'' => e,
                    _ => return None,
                });
            }
            c if c == quote => return Some((out, &body[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(t: MatchType, n: &str, v: &str) -> LabelMatcher {
        LabelMatcher { r#type: t as i32, name: n.into(), value: v.into() }
    }

    #[test]
    fn parses_the_selectors_the_ingest_writes() {
        assert_eq!(
            parse(r#"kube_pod_status_phase{phase="Running",cluster="a"}"#).unwrap(),
            vec![
                m(MatchType::Eq, "__name__", "kube_pod_status_phase"),
                m(MatchType::Eq, "phase", "Running"),
                m(MatchType::Eq, "cluster", "a")
            ]
        );
        assert_eq!(parse("up{}").unwrap(), vec![m(MatchType::Eq, "__name__", "up")]);
        assert_eq!(
            parse(r#"{__name__=~"A|B", x != 'y\'z', r!~`a\b` ,}"#).unwrap(),
            vec![m(MatchType::Re, "__name__", "A|B"), m(MatchType::Neq, "x", "y'z"), m(MatchType::Nre, "r", "a\\b")]
        );
    }

    #[test]
    fn rejects_what_is_not_a_selector() {
        for bad in ["", "{}", "up{a}", "up{a=b}", r#"up{a="b" c="d"}"#, r#"up{a="b"#, "9up", r#"up{a="\q"}"#, "up[5m]"]
        {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
