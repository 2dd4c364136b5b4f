"""The gate report as CI systems read it: JUnit XML (:mod:`.junit`), a Markdown summary for a job
summary or a pull-request comment (:mod:`.markdown`), and GitHub Actions annotations
(:mod:`.annotations`). Each is made from the report document alone, so it says what the JSON report
says, in the same order, with the same numbers."""
