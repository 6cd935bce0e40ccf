//! Secrets never leave the config: a Redis password (in the URL, in `password`, or in the
//! variable `password_env` names) and the store's other settings are checked here in every
//! place a config is shown — `--check` (`PolicySet::describe`), `GET /admin/config` and
//! config errors. (The frontends' whole-run check, every output of a live gateway, is
//! `weir_e2e::scenarios::secrets_never_reach_output`.)

use weir_policy::config::parse;
use weir_policy::{__set_test_env, Engine};

const PW: &str = "Tr0ub4dor-and-3";

fn config(store: &str) -> String {
    format!(
        "[log]\naccess = \"off\"\n[server]\nadmin = \"off\"\n\
         [[upstreams]]\nname = \"blue\"\nendpoints = [\"127.0.0.1:18181\"]\n\
         [[routes]]\nid = \"ok\"\nmatch = {{ path_prefix = \"/ok\" }}\nupstream = \"blue\"\n\
         [store]\nkind = \"redis\"\n{store}"
    )
}

/// Every way of showing the compiled config: none holds the password.
fn shown_nowhere(store: &str) -> String {
    let text = config(store);
    let set = parse(&text, "gateway.toml").unwrap_or_else(|e| panic!("{e}"));
    let described = set.describe();
    assert!(
        !described.contains(PW),
        "--check shows the password:\n{described}"
    );
    let engine = Engine::from_toml(&text, "gateway.toml").unwrap();
    let admin = engine.admin("GET", "/admin/config");
    let body = String::from_utf8_lossy(&admin.body).into_owned();
    assert_eq!(admin.status, 200);
    assert!(
        !body.contains(PW),
        "/admin/config shows the password: {body}"
    );
    assert!(!format!("{set:?}").contains(PW), "Debug shows the password");
    described
}

#[test]
fn password_in_the_url() {
    let d = shown_nowhere(&format!("url = \"redis://:{PW}@127.0.0.1:6379/0\"\n"));
    assert!(
        d.contains("store: redis redis://:***@127.0.0.1:6379/0"),
        "{d}"
    );
    let d = shown_nowhere(&format!("url = \"rediss://weir:{PW}@127.0.0.1:6379/0\"\n"));
    assert!(d.contains("rediss://weir:***@127.0.0.1:6379/0"), "{d}");
    assert!(d.contains("tls (system roots)"), "{d}");
}

#[test]
fn password_and_password_env() {
    let d = shown_nowhere(&format!(
        "url = \"redis://127.0.0.1:6379/0\"\nusername = \"weir\"\npassword = \"{PW}\"\n"
    ));
    assert!(d.contains("user weir, password ***"), "{d}");
    __set_test_env("WEIR_TEST_REDIS_PASSWORD", PW);
    let d = shown_nowhere(
        "cluster = [\"127.0.0.1:7000\"]\npassword_env = \"WEIR_TEST_REDIS_PASSWORD\"\n",
    );
    assert!(d.contains("cluster [127.0.0.1:7000], password ***"), "{d}");
}

#[test]
fn store_errors_name_the_key_and_not_the_secret() {
    let cases = [
        (
            format!("url = \"http://:{PW}@127.0.0.1/0\"\n"),
            "gateway.toml:14: store.url: expected redis://",
        ),
        (
            format!("url = \"redis://:{PW}@127.0.0.1/0\"\npassword = \"{PW}\"\n"),
            "gateway.toml:14: store.url: has a password and so does",
        ),
        (
            format!("url = \"redis://h/0\"\npassword = \"{PW}\"\npassword_env = \"X\"\n"),
            "gateway.toml:16: store.password_env: give the password either",
        ),
        (
            "url = \"redis://h/0\"\npassword_env = \"WEIR_TEST_UNSET_VARIABLE\"\n".to_string(),
            "gateway.toml:15: store.password_env: environment variable WEIR_TEST_UNSET_VARIABLE is not set",
        ),
        (
            "url = \"redis://h/0\"\ntls = { ca = \"no-such-ca.pem\" }\n".to_string(),
            "gateway.toml:15: store.tls.ca: cannot read no-such-ca.pem",
        ),
        (
            "url = \"redis://h/0\"\nusername = \"\"\n".to_string(),
            "gateway.toml:15: store.username: must not be empty",
        ),
    ];
    for (store, want) in cases {
        let e = parse(&config(&store), "gateway.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(want), "{e}\nwanted: {want}");
        assert!(!e.contains(PW), "the error shows the password: {e}");
    }
}

#[test]
fn the_ca_file_is_relative_to_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("certs")).unwrap();
    std::fs::write(
        dir.path().join("certs/ca.pem"),
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let origin = dir.path().join("gateway.toml");
    let set = parse(
        &config("url = \"redis://h/0\"\ntls = { ca = \"certs/ca.pem\" }\n"),
        &origin.display().to_string(),
    )
    .unwrap();
    let ca = set.store.unwrap().tls.unwrap().ca.unwrap();
    assert_eq!(ca.0, dir.path().join("certs/ca.pem"));
    // A file that is not PEM is refused at load, naming the key.
    std::fs::write(dir.path().join("certs/ca.pem"), "not a certificate").unwrap();
    let e = parse(
        &config("url = \"redis://h/0\"\ntls = { ca = \"certs/ca.pem\" }\n"),
        &origin.display().to_string(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("store.tls.ca: ") && e.contains("no PEM certificate"),
        "{e}"
    );
}
