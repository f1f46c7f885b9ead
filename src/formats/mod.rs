//! The formats front-ends speak: exports of tool definitions and parsing of model calls.

pub mod functiongemma;
