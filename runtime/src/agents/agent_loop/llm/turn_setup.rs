//! What a turn runs with once the caller's controls are applied: the instruction (the
//! personality's, `systemOverride`, `systemAppend`), the sampling (the call's over the
//! personality's over the agent's, resolved for the provider), and the first request.

use super::LlmAgent;
use crate::agents::agent_loop::AgentRequest;
use crate::agents::agent_loop::compaction::{self, SUMMARY_HEADING};
use crate::agents::llm::{ChatMessage, ChatRequest, ToolSpec};
use crate::config::sampling::{self, Sampling, SamplingParams, Target};
use crate::stores::conversations::Conversation;

/// What a turn runs with once the caller's controls are applied: the instruction and the
/// sampling (the call's, over the personality's, over the agent's).
pub(super) struct TurnSetup {
    pub(super) instruction: String,
    pub(super) sampling: SamplingParams,
}

impl LlmAgent {
    /// The sampling of a request: what the provider takes of `sampling`, with the model's
    /// output budget capping `max_tokens` (and standing in where the provider requires one).
    pub(super) fn sampling(&self, sampling: &SamplingParams) -> Sampling {
        let (mut resolved, dropped) = sampling::for_target(sampling, &self.target);
        self.warnings
            .warn(&self.name, self.provider.name(), &dropped);
        let budget = u64::from(self.max_output_tokens);
        resolved.max_tokens = match resolved.max_tokens {
            Some(asked) => Some(asked.min(budget)),
            None if matches!(self.target, Target::Anthropic { .. }) => Some(budget),
            None => None,
        };
        resolved
    }

    /// The instruction and sampling of `request`'s turn: its personality (or the agent's
    /// default one), `systemOverride` and `systemAppend`; `Err` names what the call got wrong.
    pub(super) fn setup(&self, request: &AgentRequest) -> Result<TurnSetup, super::CannotStart> {
        let controls = &request.controls;
        let named = controls
            .personality
            .as_deref()
            .or(self.default_personality.as_deref());
        let personality = match named {
            None => None,
            Some(name) => Some(self.personalities.get(name).ok_or_else(|| {
                let known: Vec<&str> = self.personalities.keys().map(String::as_str).collect();
                super::CannotStart::UnknownPersonality {
                    name: name.to_owned(),
                    agent: self.name.clone(),
                    known: if known.is_empty() {
                        "it has none".to_owned()
                    } else {
                        known.join(", ")
                    },
                }
            })?),
        };
        let mut instruction = controls
            .system_override
            .clone()
            .unwrap_or_else(|| self.instruction.clone());
        for more in [
            personality.map(|p| p.instruction.as_str()),
            controls.system_append.as_deref(),
        ]
        .into_iter()
        .flatten()
        .filter(|t| !t.is_empty())
        {
            if !instruction.is_empty() {
                instruction.push_str("\n\n");
            }
            instruction.push_str(more);
        }
        let defaults = match personality {
            Some(p) => p.request_params.over(&self.defaults),
            None => self.defaults.clone(),
        };
        Ok(TurnSetup {
            instruction,
            sampling: request.sampling.over(&defaults),
        })
    }

    /// What the turn's request costs before the conversation: the system prompt and the tools.
    pub(super) fn fixed_tokens(instruction: &str, tools: &[ToolSpec]) -> u64 {
        crate::agents::agent_loop::window::text_tokens(instruction)
            + tools
                .iter()
                .map(|t| {
                    crate::agents::agent_loop::window::text_tokens(&t.description)
                        + crate::agents::agent_loop::window::text_tokens(
                            &t.input_schema.to_string(),
                        )
                })
                .sum::<u64>()
    }

    /// The first request of the turn: the instruction (and the summary compaction left), the
    /// conversation, the new message.
    pub(super) fn first_request(
        &self,
        request: &AgentRequest,
        setup: &TurnSetup,
        conversation: Conversation,
        new: ChatMessage,
        tools: Vec<ToolSpec>,
    ) -> ChatRequest {
        let instruction = &setup.instruction;
        let fixed = Self::fixed_tokens(instruction, &tools)
            + compaction::summary_tokens(conversation.summary.as_deref());
        let system = match &conversation.summary {
            Some(summary) if instruction.is_empty() => {
                Some(format!("{SUMMARY_HEADING}\n{summary}"))
            }
            Some(summary) => Some(format!("{instruction}\n\n{SUMMARY_HEADING}\n{summary}")),
            None => Some(instruction.clone()).filter(|s| !s.is_empty()),
        };
        let mut messages: Vec<ChatMessage> = conversation
            .turns
            .into_iter()
            .flat_map(|t| t.messages)
            .collect();
        messages.push(new);
        // Compaction made the conversation fit; this is the last resort when it could not.
        let room = u64::from(self.context_window).saturating_sub(u64::from(self.max_output_tokens));
        let dropped = crate::agents::agent_loop::window::fit(&mut messages, fixed, room);
        if dropped > 0 {
            tracing::warn!(
                agent = %self.name,
                context = %request.context_id,
                dropped,
                context_window = self.context_window,
                "the conversation is longer than the context window; its oldest turns were left out"
            );
        }
        ChatRequest {
            model: self.model.clone(),
            system,
            messages,
            tools,
            sampling: self.sampling(&setup.sampling),
            stream: request.stream,
            caller: request.bearer.clone(),
            extra: request.controls.extra.clone().unwrap_or_default(),
        }
    }
}
