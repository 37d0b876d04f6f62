use super::*;

#[test]
fn secrets_never_print() {
    let secret = Secret::new("s3cr3t");
    assert_eq!(format!("{secret:?}"), "***");
    let client = OAuthClient {
        token_url: "https://user:pw@idp.example/token?key=k".to_owned(),
        client_id: "proxy".to_owned(),
        client_secret: secret,
        scope: None,
        audience: None,
    };
    let shown = format!("{client:?} {}", serde_json::to_string(&client).unwrap());
    assert!(!shown.contains("s3cr3t"), "{shown}");
    let json = serde_json::to_string(&client).unwrap();
    assert!(!json.contains("pw") && !json.contains("key=k"), "{json}");
}

#[test]
fn a_token_is_fetched_again_before_it_expires() {
    let long = held_for(Secret::new("t"), Duration::from_hours(1));
    assert_eq!(long.expires_at - long.refresh_at, REFRESH_AHEAD);
    let short = held_for(Secret::new("t"), Duration::from_secs(10));
    assert_eq!(short.expires_at - short.refresh_at, Duration::from_secs(5));
}

#[tokio::test]
async fn a_token_file_is_read_again_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, "first\n").unwrap();
    let credentials = Credentials::new(CredentialSource::TokenFile(path.clone()));
    assert_eq!(credentials.bearer().await.unwrap().expose(), "first");
    assert_eq!(credentials.bearer().await.unwrap().expose(), "first");
    assert_eq!(credentials.fetches(), 1, "held, not read again");
    // A new file (as a projected token is replaced); its time differs.
    std::thread::sleep(Duration::from_millis(20));
    let next = dir.path().join("token.new");
    std::fs::write(&next, "second").unwrap();
    std::fs::rename(&next, &path).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while credentials.bearer().await.unwrap().expose() != "second" {
        assert!(Instant::now() < deadline, "the new token is read");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    std::fs::write(&path, "two tokens").unwrap();
    credentials.invalidate();
    let e = credentials.bearer().await.unwrap_err();
    assert!(matches!(e, CredentialError::File { .. }), "{e}");
}

#[tokio::test]
async fn an_endpoint_that_is_not_there_is_a_clear_error_naming_it_masked() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/token?secret=abc", closed.local_addr().unwrap());
    drop(closed);
    let credentials = Credentials::new(CredentialSource::ClientCredentials(OAuthClient {
        token_url: url,
        client_id: "c".to_owned(),
        client_secret: Secret::new("s3cr3t"),
        scope: Some("a b".to_owned()),
        audience: Some("rt".to_owned()),
    }));
    let e = credentials.bearer().await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, CredentialError::Unreachable { .. }), "{text}");
    assert!(!text.contains("abc") && !text.contains("s3cr3t"), "{text}");
}

#[test]
fn a_refused_client_is_lasting_and_an_endpoint_that_does_not_answer_is_not() {
    let url = || "https://idp.example/token".to_owned();
    let refused = |error: &str| CredentialError::Refused {
        url: url(),
        error: error.to_owned(),
        description: None,
    };
    for lasting in [
        refused("invalid_client"),
        refused("unauthorized_client"),
        refused("invalid_scope"),
        CredentialError::Status {
            url: url(),
            status: 401,
        },
        CredentialError::BadUrl { url: url() },
    ] {
        assert!(lasting.is_lasting(), "{lasting}");
    }
    for passing in [
        refused("temporarily_unavailable"),
        CredentialError::Status {
            url: url(),
            status: 503,
        },
        CredentialError::Status {
            url: url(),
            status: 429,
        },
        CredentialError::Unreachable {
            url: url(),
            why: "connection refused".to_owned(),
        },
        CredentialError::Timeout {
            url: url(),
            after: FETCH_TIMEOUT,
        },
        CredentialError::File {
            path: "/var/run/secrets/token".to_owned(),
            why: "not found".to_owned(),
        },
    ] {
        assert!(!passing.is_lasting(), "{passing}");
    }
}
