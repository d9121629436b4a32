mod claims;
mod compiler;
mod fidelity;
mod relevance;
mod restatements;
mod router;
