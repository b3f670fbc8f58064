//! A maintainers' thread as they write them, shared by the context store's
//! tests and the classification benchmark.

/// A conversation of 20 messages: the problem, then constraints,
/// refinements, questions and chatter.
pub fn conversation() -> Vec<&'static str> {
    vec![
        "Add CSV export to the monthly report page",
        "It must use semicolons as separators",
        "Looks good so far",
        "Can it handle 10,000 rows?",
        "Also add a header row with the column names",
        "Thanks for the quick reply",
        "The export must not load the whole table into memory",
        "Which module holds the report code?",
        "Instead of a button, use a link in the toolbar",
        "Nice",
        "Dates must be ISO 8601",
        "What about time zones?",
        "Keep the file name as report-YYYY-MM.csv",
        "ok",
        "Do not add new dependencies",
        "Great",
        "Also escape quotes in text fields",
        "Is there a test for the page?",
        "Only maintainers may see the export link",
        "Please go ahead",
    ]
}
