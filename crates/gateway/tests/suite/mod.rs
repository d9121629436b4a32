mod anthropic;
mod command;
mod command_liveness;
mod common;
mod contain;
mod gemini;
mod openai;
mod server;
