//! Checks of the response codes for bad requests, and of error bodies.

use daedalus_contract::{ErrorBody, Schema};

use super::{Evidence, Verdict, fail};
use crate::client::Exchange;

pub(super) fn status_is(exchange: &Exchange, expected: u16) -> Verdict {
    let answer = exchange.answer().map_err(fail)?;
    if answer.status == expected {
        Ok(())
    } else {
        Err(fail(format!(
            "{} answered {}, expected {expected}",
            exchange.request, answer.status
        )))
    }
}

/// Every error answer (status >= 400) carries `{"error": {"code": <status>, "message"}}`.
pub(super) fn error_bodies(e: &Evidence) -> Verdict {
    let exchanges = [&e.malformed, &e.not_a_request, &e.text_plain, &e.oversized];
    let mut seen = 0;
    for exchange in exchanges {
        let Ok(answer) = exchange.answer() else {
            continue;
        };
        if answer.status < 400 {
            continue;
        }
        seen += 1;
        let body = answer
            .json()
            .map_err(|r| fail(format!("{}: {r}", exchange.request)))?;
        Schema::Error
            .validate(&body)
            .map_err(|err| fail(format!("{}: {err}", exchange.request)))?;
        let parsed: ErrorBody = serde_json::from_value(body)
            .map_err(|err| fail(format!("{}: {err}", exchange.request)))?;
        if parsed.error.code != answer.status {
            return Err(fail(format!(
                "{}: status {} but error.code {}",
                exchange.request, answer.status, parsed.error.code
            )));
        }
    }
    if seen == 0 {
        Err(super::skip("no error answers to inspect"))
    } else {
        Ok(())
    }
}
