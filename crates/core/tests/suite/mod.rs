mod claims;
mod compiler;
mod restatements;
