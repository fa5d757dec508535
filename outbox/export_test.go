package outbox

// CrashOnCancel makes r behave like a process that dies when its context
// ends: Run returns without finishing, marking or releasing the batches in
// flight, which stay processing until their lease expires.
func CrashOnCancel(r *Relay) { r.hardStop = true }
