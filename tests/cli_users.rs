//! `cardhour user create|list|disable|set-password`: passwords from standard input, and every refusal (a taken
//! name, a bad role, a team lead without a team, an unknown team) a message, a non-zero exit and nothing written.

use crate::common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::{TestDb, cardhour_bin};

/// `cardhour ARGS` on `db` with `stdin` as standard input.
fn run(db: &TestDb, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(cardhour_bin())
        .args(args)
        .env("DATABASE_URL", &db.url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn counts(db: &TestDb) -> String {
    db.psql("SELECT (SELECT count(*) FROM users) || ',' || (SELECT count(*) FROM audit_log)").unwrap()
}

#[test]
fn users_are_created_listed_disabled_and_given_new_passwords() {
    let db = TestDb::migrated().unwrap();
    db.psql("INSERT INTO teams (id, name) VALUES ('vision', '视觉组'), ('nlp', 'NLP')").unwrap();
    let out =
        run(&db, &["user", "create", "--username", "mei", "--role", "finance", "--password-stdin"], "pw-of-mei-1\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let args = ["user", "create", "--username", "li", "--role", "team_lead", "--team", "vision", "--team", "nlp"];
    let out = run(&db, &[&args[..], &["--password-stdin"]].concat(), "pw-of-li-22");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "user li created (team_lead of vision, nlp)");

    let hash = db.psql("SELECT password_hash FROM users WHERE username = 'mei'").unwrap();
    assert!(hash.starts_with("$argon2id$"), "{hash}");
    assert!(cardhour::auth::password::verify("pw-of-mei-1", &hash), "the first line of stdin, without its newline");
    assert!(!hash.contains("pw-of-mei"));

    let list = run(&db, &["user", "list", "--format", "json"], "");
    let users: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let names: Vec<_> = users.as_array().unwrap().iter().map(|u| u["username"].as_str().unwrap()).collect();
    assert_eq!(names, ["li", "mei"]);
    assert_eq!(users[0]["teams"], serde_json::json!(["vision", "nlp"]));
    assert!(!String::from_utf8_lossy(&list.stdout).contains("argon2"), "never a hash");
    let text = String::from_utf8(run(&db, &["user", "list"], "").stdout).unwrap();
    assert!(text.lines().any(|l| l.starts_with("mei ") && l.contains("finance") && l.contains("active")), "{text}");

    let out = run(&db, &["user", "disable", "mei"], "");
    assert!(out.status.success());
    assert_eq!(db.psql("SELECT disabled_at IS NOT NULL FROM users WHERE username = 'mei'").unwrap(), "t");
    let out = run(&db, &["user", "set-password", "li", "--password-stdin"], "a-new-password\r\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let hash = db.psql("SELECT password_hash FROM users WHERE username = 'li'").unwrap();
    assert!(cardhour::auth::password::verify("a-new-password", &hash));

    let audit = db.psql("SELECT action || ' ' || entity FROM audit_log ORDER BY id").unwrap();
    assert_eq!(audit, "user.create user:mei\nuser.create user:li\nuser.disable user:mei\nuser.set_password user:li");
    assert!(!db.psql("SELECT string_agg(after::text, ' ') FROM audit_log").unwrap().contains("argon2"));
}

#[test]
fn refused_users_are_a_message_a_failure_and_nothing_written() {
    let db = TestDb::migrated().unwrap();
    db.psql("INSERT INTO teams (id, name) VALUES ('vision', '视觉组')").unwrap();
    let ok = run(&db, &["user", "create", "--username", "mei", "--role", "viewer", "--password-stdin"], "pw-of-mei-1");
    assert!(ok.status.success());
    let before = counts(&db);
    for (args, stdin, says) in [
        (vec!["--username", "mei", "--role", "viewer"], "another-pw-1", "user `mei` exists"),
        (vec!["--username", "kai", "--role", "boss"], "another-pw-1", "invalid value 'boss'"),
        (vec!["--username", "kai", "--role", "team_lead"], "another-pw-1", "a team_lead needs at least one team"),
        (vec!["--username", "kai", "--role", "team_lead", "--team", "nope"], "another-pw-1", "unknown team `nope`"),
        (
            vec!["--username", "kai", "--role", "finance", "--team", "vision"],
            "another-pw-1",
            "only a team_lead has teams",
        ),
        (vec!["--username", "Kai Wu", "--role", "viewer"], "another-pw-1", "--username: use a-z"),
        (vec!["--username", "kai", "--role", "viewer"], "short", "at least 8 characters"),
        (vec!["--username", "kai", "--role", "viewer"], "", "no password on standard input"),
    ] {
        let out = run(&db, &[&["user", "create"][..], &args, &["--password-stdin"]].concat(), stdin);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(counts(&db), before, "{args:?} wrote something");
    }
    // without --password-stdin there is no way to give a password
    let out = run(&db, &["user", "create", "--username", "kai", "--role", "viewer"], "pw-pw-pw-pw");
    assert!(!out.status.success());
    for args in [vec!["user", "disable", "ghost"], vec!["user", "set-password", "ghost", "--password-stdin"]] {
        let out = run(&db, &args, "another-pw-1");
        assert!(!out.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("no user `ghost`"), "{args:?}");
        assert_eq!(counts(&db), before);
    }
}
