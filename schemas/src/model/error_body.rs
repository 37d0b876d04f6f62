//! `ErrorBody`: the JSON body of every error response of the contract face.

use serde::{Deserialize, Serialize};

/// `{"error": {"code": <http status>, "message": "..."}}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// The code and the human-readable message of an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: u16,
    pub message: String,
}

impl ErrorBody {
    pub fn new(code: u16, message: impl Into<String>) -> Self {
        Self {
            error: ErrorDetail {
                code,
                message: message.into(),
            },
        }
    }
}
