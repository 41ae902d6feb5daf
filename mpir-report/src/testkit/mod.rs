//! Test support (feature `testkit`): a headless Chromium driven over WebDriver, and synthetic
//! documents of any size. The tool's report tests and the report benchmark use them; they
//! are not part of the library's API.

pub mod browser;
pub mod synthetic;
