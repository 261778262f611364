//! A database that accepts only TLS, as managed PostgreSQL services are set up: `cardhour` connects with
//! `sslmode=verify-full` and the service's CA, and refuses a server whose certificate its CA did not sign.
//! (Until sqlx was built with TLS, every such URL failed with "SQLx was built without TLS support".)

use crate::common;

use common::pg::TestPostgres;
use common::run_cardhour;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};

/// A CA and a server certificate for 127.0.0.1 it signed: (CA PEM, server certificate PEM, server key PEM).
fn certificates(ca_name: &str) -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, ca_name);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, "postgres");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server = params.signed_by(&key, &issuer).unwrap();
    (ca.pem(), server.pem(), key.serialize_pem())
}

fn migrate(url: &str) -> std::process::Output {
    run_cardhour(["migrate"], &[("DATABASE_URL", url)])
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_database_that_requires_tls_is_migrated_over_verified_tls_and_nothing_else() {
    let pg = TestPostgres::start().unwrap();
    let (ca, cert, key) = certificates("managed database CA");
    pg.require_tls(&cert, &key).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let (other_ca, _, _) = certificates("some other CA");
    let other_ca_file = dir.path().join("other-ca.pem");
    std::fs::write(&other_ca_file, other_ca).unwrap();
    let base = format!("postgres://postgres@127.0.0.1:{}/cardhour", pg.port);

    // without encryption the server refuses, and says why
    let plain = migrate(&format!("{base}?sslmode=disable"));
    assert!(!plain.status.success(), "an unencrypted connection was accepted");
    assert!(stderr(&plain).contains("no encryption"), "{}", stderr(&plain));
    assert_eq!(pg.psql("cardhour", "SELECT to_regclass('_sqlx_migrations') IS NULL").unwrap(), "t");

    // a server certificate the given CA did not sign is refused before anything is sent
    let rogue = migrate(&format!("{base}?sslmode=verify-full&sslrootcert={}", other_ca_file.display()));
    assert!(!rogue.status.success(), "a certificate of another CA was trusted");
    assert!(stderr(&rogue).to_lowercase().contains("certificate"), "{}", stderr(&rogue));
    assert_eq!(pg.psql("cardhour", "SELECT to_regclass('_sqlx_migrations') IS NULL").unwrap(), "t");

    // verified TLS: the schema is made, every migration recorded
    let ok = migrate(&format!("{base}?sslmode=verify-full&sslrootcert={}", ca_file.display()));
    assert!(ok.status.success(), "migrate over TLS failed: {}", stderr(&ok));
    let migrations = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "sql"))
        .count();
    assert!(migrations > 0);
    let applied = pg.psql("cardhour", "SELECT count(*) FROM _sqlx_migrations WHERE success").unwrap();
    assert_eq!(applied, migrations.to_string());
}
