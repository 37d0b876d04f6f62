//! Sampling parameters, typed from the caller to the provider's wire.
//!
//! - [`SamplingParams`]: what an agent (`request_params`), a personality or a call asks for,
//!   where `null` clears a default ([`Setting::Clear`]); layers compose with
//!   [`SamplingParams::over`]: the call, then the personality, then the agent.
//! - [`Sampling`]: the settings of one provider request, after [`for_target`] has taken out
//!   what the provider cannot take (each drop warned once per agent by [`DropWarnings`]).
//!   Each provider client spells it in its own wire struct.
//!
//! The support matrix:
//!
//! | key | OpenAI | Anthropic |
//! |---|---|---|
//! | `temperature`, `top_p` | yes (not to OpenAI's reasoning models) | yes (none on Opus 4.7) |
//! | `top_k` | compatible servers only (vLLM, llama.cpp, ...), not the `openai` dialect | yes (none on Opus 4.7) |
//! | `max_tokens` | yes (`max_completion_tokens` on the `openai` dialect) | yes (required; defaults to the model's `max_output_tokens`) |
//! | `stop` | yes | as `stop_sequences` |
//! | `seed`, `response_format` | yes | no |
//! | `presence_penalty`, `frequency_penalty` | yes (not to OpenAI's reasoning models) | no |
//! | `tool_choice` | yes | translated (`required` ⇒ `any`, a function ⇒ `tool`) |
//! | `effort` (`low` … `max`) | as `reasoning_effort` (`xhigh` and `max` as `high`, the top of OpenAI's scale); on the `openai` dialect to reasoning models only, elsewhere unless the model is declared not to reason | as `output_config.effort` |

mod params;
mod target;

pub use params::{Effort, SamplingError, SamplingParams, Setting, Stop, ToolChoice};
pub use target::{DropWarnings, Dropped, Sampling, Target, for_target};
