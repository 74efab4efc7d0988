package diskscan

// spawn starts f in a goroutine. Every goroutine of this package is
// started here (TestEveryGoroutineIsSpawned checks the source), so a test
// can prove that Options.Sequential starts none.
var spawn = func(f func()) { go f() }
