//! Durations as the command line and the configuration files give them: `90s`, `10m`, `1h30m`, or seconds.

use std::time::Duration;

/// `90s`, `10m`, `1h30m` (humantime), or a bare number of seconds; zero is refused.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = match s.trim().parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => humantime::parse_duration(s.trim())
            .map_err(|e| format!("`{s}` is not a duration ({e}); e.g. 60s, 10m, 1h"))?,
    };
    if d.is_zero() { Err(format!("`{s}` must be longer than zero")) } else { Ok(d) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("60"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("soon").is_err());
    }
}
