mod claims;
mod cold;
mod compiler;
mod fidelity;
mod relevance;
mod restatements;
mod review_scope;
mod router;
