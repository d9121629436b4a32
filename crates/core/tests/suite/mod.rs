mod compiler;
