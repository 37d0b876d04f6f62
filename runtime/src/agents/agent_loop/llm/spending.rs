//! A model call held to its turn's budgets (`budgets:`): its tokens reserved before it is made
//! (the prompt's size and its answer's largest), settled with the provider's reported usage
//! after. A minute's window that is full makes the call wait for the next minute; a budget the
//! turn cannot go on under (the day's tokens, `tokens_per_turn`) fails the turn, naming it.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::LlmAgent;
use crate::agents::agent_loop::AgentOutcome;
use crate::agents::budgets::{CallRefused, Reservation, TurnBudget};
use crate::agents::llm::ChatRequest;

/// How long a call waits for a window whose refusal gave no time.
const DEFAULT_WAIT: Duration = Duration::from_secs(1);

impl LlmAgent {
    /// Reserves the tokens of the call `chat` asks for, waiting (until `cancel`) while a
    /// minute's window is full; the outcome that ends the turn when no wait helps.
    pub(super) async fn reserve_tokens(
        &self,
        budget: &TurnBudget,
        chat: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<Reservation, AgentOutcome> {
        if !budget.is_limited() {
            return Ok(Reservation::none());
        }
        let prompt = prompt_tokens(chat);
        let output = chat
            .sampling
            .max_tokens
            .unwrap_or(u64::from(self.max_output_tokens))
            .min(u64::from(self.max_output_tokens));
        loop {
            match budget.reserve(prompt, output, &self.priced_as()).await {
                Ok(reservation) => return Ok(reservation),
                Err(CallRefused::Stop(refusal)) => {
                    return Err(AgentOutcome::Failed {
                        reason: refusal.to_string(),
                    });
                }
                Err(CallRefused::Wait(refusal)) => {
                    let wait = refusal.retry_after.unwrap_or(DEFAULT_WAIT);
                    tracing::info!(agent = %self.name, wait = ?wait, %refusal, "a model call waits for its budget's next window");
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = cancel.cancelled() => return Err(AgentOutcome::Canceled),
                    }
                }
            }
        }
    }
}

/// About how many tokens `chat`'s prompt takes: four bytes of its text a token.
fn prompt_tokens(chat: &ChatRequest) -> u64 {
    let messages = serde_json::to_vec(&chat.messages).map_or(0, |bytes| bytes.len());
    let system = chat.system.as_ref().map_or(0, String::len);
    let tools = serde_json::to_vec(&chat.tools).map_or(0, |bytes| bytes.len());
    u64::try_from((messages + system + tools).div_ceil(4)).unwrap_or(u64::MAX)
}

impl LlmAgent {
    /// The model's name in `models:` (`<provider>.<model>`), which its price is kept under.
    fn priced_as(&self) -> String {
        format!("{}.{}", self.provider.name(), self.model)
    }
}
