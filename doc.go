// Package caretaker finds and safely cleans up what storage clusters leave
// behind. See the README and the package documentation of orphan, diskscan,
// spdk, backupdelete, rebuild and tokenring.
package caretaker
