"""The pytest session's side: collection, the session object and its parts (launch, stopping, notes, the item protocol,
waves, resume), what each item's report says, the results, what the session concludes from them, its exit status and
how it finishes."""
