//! The Streamable HTTP transport (placeholder while the core moves).
