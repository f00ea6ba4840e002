"""The only code that runs inside a candidate's (hostile) process: the harness that imports the solution and answers the judge's requests. Nothing here decides anything."""
