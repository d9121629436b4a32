mod anthropic;
mod command;
mod command_liveness;
mod common;
mod gemini;
mod openai;
mod server;
