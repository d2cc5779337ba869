//! Misuse does not compile: one misuse per file in `tests/ui/`, each with a
//! comment naming the rule it guards and its expected compiler message in
//! the `.stderr` beside it; `tests/ui/pass/` holds the permitted uses.
//!
//! Regenerate the messages after a deliberate change with
//! `TRYBUILD=overwrite cargo test -p duplex-tests --test compile_fail`.

#[test]
fn misuse_does_not_compile() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/*.rs");
    cases.pass("ui/pass/*.rs");
}
