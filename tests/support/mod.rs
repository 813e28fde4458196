//! The shared test helpers live in the `test-support` crate (tests/support/src); this keeps
//! `mod support; use support::*;` compiling until every test file says `use test_support::*;`.
pub use test_support::*;
