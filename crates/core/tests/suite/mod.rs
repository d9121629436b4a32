mod claims;
mod compiler;
mod fidelity;
mod relevance;
mod restatements;
mod review_scope;
mod router;
