mod claims;
mod compiler;
