mod anthropic;
mod common;
mod gemini;
mod openai;
mod server;
