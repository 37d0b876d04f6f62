//! The HTTP side of the suite: one request, its status, content type and body, kept whole so
//! that checks can say exactly what came back.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::CONTENT_TYPE;
use serde_json::Value;

/// A client bound to the runtime under test.
#[derive(Debug, Clone)]
pub struct Probe {
    base: String,
    http: reqwest::Client,
}

/// One request and its answer.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// `POST /`, `GET /health`, for reasons.
    pub request: String,
    pub result: Result<Answer, String>,
}

/// What the runtime answered.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Bytes,
}

impl Probe {
    pub fn new(base: &str, timeout: Duration) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()?;
        Ok(Self {
            base: base.trim_end_matches('/').to_owned(),
            http,
        })
    }

    pub async fn get(&self, path: &str) -> Exchange {
        let request = format!("GET {path}");
        let result = self.http.get(format!("{}{path}", self.base)).send().await;
        Exchange {
            request,
            result: Self::answer(result).await,
        }
    }

    /// GETs an absolute URL (a key set a card's signature names).
    pub async fn get_url(&self, url: &str) -> Exchange {
        let request = format!("GET {url}");
        let result = self.http.get(url).send().await;
        Exchange {
            request,
            result: Self::answer(result).await,
        }
    }

    /// POSTs `body` to `/` with the given content type (`None`: no Content-Type header).
    pub async fn post(&self, body: impl Into<Bytes>, content_type: Option<&str>) -> Exchange {
        let mut req = self.http.post(format!("{}/", self.base)).body(body.into());
        if let Some(ct) = content_type {
            req = req.header(CONTENT_TYPE, ct);
        }
        let request = format!("POST / ({})", content_type.unwrap_or("no Content-Type"));
        Exchange {
            request,
            result: Self::answer(req.send().await).await,
        }
    }

    /// POSTs a JSON value as `application/json`.
    pub async fn post_json(&self, body: &Value) -> Exchange {
        self.post_json_with(body, &[]).await
    }

    /// [`Probe::post_json`] with extra request headers (`traceparent`).
    pub async fn post_json_with(&self, body: &Value, headers: &[(&str, &str)]) -> Exchange {
        let mut req = self
            .http
            .post(format!("{}/", self.base))
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        Exchange {
            request: "POST / (application/json)".to_owned(),
            result: Self::answer(req.send().await).await,
        }
    }

    /// POSTs a JSON value asking for its event stream (`Accept: text/event-stream`); the whole
    /// stream is read (under the timeout) and kept.
    pub async fn post_stream(&self, body: &Value) -> Exchange {
        let req = self
            .http
            .post(format!("{}/", self.base))
            .header(CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body.to_string());
        Exchange {
            request: "POST / (Accept: text/event-stream)".to_owned(),
            result: Self::answer(req.send().await).await,
        }
    }

    async fn answer(result: Result<reqwest::Response, reqwest::Error>) -> Result<Answer, String> {
        let response = result.map_err(|e| describe(&e))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = response.bytes().await.map_err(|e| describe(&e))?;
        Ok(Answer {
            status,
            content_type,
            body,
        })
    }
}

fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

impl Answer {
    /// Whether the Content-Type is `text/event-stream`.
    pub fn is_event_stream(&self) -> bool {
        self.content_type.as_deref().is_some_and(|ct| {
            ct.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .eq_ignore_ascii_case("text/event-stream")
        })
    }

    /// The `data` of each SSE event of the body, in order (comments and events without data
    /// left out).
    pub fn sse_data(&self) -> Vec<String> {
        let text = String::from_utf8_lossy(&self.body).replace("\r\n", "\n");
        text.split("\n\n")
            .filter_map(|frame| {
                let data: Vec<&str> = frame
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                (!data.is_empty()).then(|| data.join("\n"))
            })
            .collect()
    }

    /// Whether the Content-Type is JSON (`application/json` or any `+json` type).
    pub fn is_json_type(&self) -> bool {
        self.content_type.as_deref().is_some_and(|ct| {
            let essence = ct
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            essence == "application/json" || essence.ends_with("+json")
        })
    }

    /// The body as JSON.
    pub fn json(&self) -> Result<Value, String> {
        serde_json::from_slice(&self.body).map_err(|e| {
            let preview: String = String::from_utf8_lossy(&self.body)
                .chars()
                .take(60)
                .collect();
            format!("body is not JSON ({e}): {preview:?}")
        })
    }
}

impl Exchange {
    /// The answer, or a reason naming the request that got none.
    pub fn answer(&self) -> Result<&Answer, String> {
        self.result
            .as_ref()
            .map_err(|e| format!("{}: no answer: {e}", self.request))
    }
}

impl Exchange {
    /// The body of a 200 answer with a JSON content type, parsed; or why there is none.
    pub fn json_200(&self) -> Result<Value, String> {
        let answer = self.answer()?;
        if answer.status != 200 {
            let body: String = String::from_utf8_lossy(&answer.body)
                .chars()
                .take(120)
                .collect();
            return Err(format!(
                "{} answered {} {body}",
                self.request, answer.status
            ));
        }
        if !answer.is_json_type() {
            return Err(format!(
                "{} answered Content-Type {:?}, not application/json",
                self.request,
                answer.content_type.as_deref().unwrap_or("(none)")
            ));
        }
        answer.json().map_err(|e| format!("{}: {e}", self.request))
    }
}
