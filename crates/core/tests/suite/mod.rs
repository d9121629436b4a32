mod claims;
mod compiler;
mod fidelity;
