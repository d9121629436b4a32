mod claims;
mod compiler;
mod fidelity;
mod restatements;
mod router;
