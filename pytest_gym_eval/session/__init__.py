"""The pytest session's side: collection, the session object and its parts (launch, stopping, notes, the item protocol,
waves, resume), the results it concludes and how it finishes."""
