package spdkrpc

import (
	"context"
	"errors"
	"fmt"
)

// BdevGetBdevs lists bdevs: all of them for name "", else the one bdev
// whose name, alias or UUID is name (a missing one is an error matching
// ErrNotFound). A null result, or an element without a name, is a
// *ResultError: an unreadable listing never means "nothing exists".
func BdevGetBdevs(ctx context.Context, c Caller, name string) ([]Bdev, error) {
	var params any
	if name != "" {
		params = struct {
			Name string `json:"name"`
		}{name}
	}
	return list(ctx, c, "bdev_get_bdevs", params, func(b *Bdev) string { return b.Name })
}

// BdevLvolGetLvstores lists every lvstore. Like BdevGetBdevs, it fails with
// a *ResultError on a null result or a nameless element.
func BdevLvolGetLvstores(ctx context.Context, c Caller) ([]Lvstore, error) {
	return list(ctx, c, "bdev_lvol_get_lvstores", nil, func(l *Lvstore) string { return l.Name })
}

// BdevLvolGetLvols lists the lvols of the lvstore named lvsName, or of
// every lvstore for "". Like BdevGetBdevs, it fails with a *ResultError on
// a null result or a nameless element.
func BdevLvolGetLvols(ctx context.Context, c Caller, lvsName string) ([]Lvol, error) {
	var params any
	if lvsName != "" {
		params = struct {
			LvsName string `json:"lvs_name"`
		}{lvsName}
	}
	return list(ctx, c, "bdev_lvol_get_lvols", params, func(l *Lvol) string { return l.Name })
}

// BdevRaidGetBdevs lists RAID bdevs of a category ("" means all). Like
// BdevGetBdevs, it fails with a *ResultError on a null result or a nameless
// element.
func BdevRaidGetBdevs(ctx context.Context, c Caller, category string) ([]RaidBdev, error) {
	if category == "" {
		category = RaidCategoryAll
	}
	params := struct {
		Category string `json:"category"`
	}{category}
	return list(ctx, c, "bdev_raid_get_bdevs", params, func(r *RaidBdev) string { return r.Name })
}

// list calls a list method and checks its result with checkList.
func list[T any](ctx context.Context, c Caller, method string, params any, name func(*T) string) ([]T, error) {
	var out []T
	if err := c.Call(ctx, method, params, &out); err != nil {
		return nil, err
	}
	if err := checkList(method, out, name); err != nil {
		return nil, err
	}
	return out, nil
}

// Errors checkList reports inside a *ResultError.
var (
	errNullResult = errors.New("result is null, not a list")
	errNameless   = errors.New("list element has no name (null, or not an object of the method's kind)")
)

// checkList rejects what json.Unmarshal lets through but SPDK never sends:
// a null result (a nil slice: "[]" decodes to an empty non-nil one) and
// null or foreign elements, which decode to values without a name. An
// object where a list belongs, or a list of numbers, already failed to
// decode.
func checkList[T any](method string, list []T, name func(*T) string) error {
	if list == nil {
		return &ResultError{Method: method, Err: errNullResult}
	}
	for i := range list {
		if name(&list[i]) == "" {
			return &ResultError{Method: method, Err: fmt.Errorf("element %d: %w", i, errNameless)}
		}
	}
	return nil
}

// BdevLvolDelete deletes the lvol whose UUID or alias is name. Deleting by
// UUID is what makes a UUID-checked purge race-free. An lvol that does not
// exist is an error matching ErrNotFound.
func BdevLvolDelete(ctx context.Context, c Caller, name string) error {
	return deleteCall(ctx, c, "bdev_lvol_delete", name)
}

// BdevRaidDelete deletes the RAID bdev named name. A missing one is an
// error matching ErrNotFound.
func BdevRaidDelete(ctx context.Context, c Caller, name string) error {
	return deleteCall(ctx, c, "bdev_raid_delete", name)
}

// errNotTrue is a delete reply of anything but true.
var errNotTrue = errors.New("result is not true")

func deleteCall(ctx context.Context, c Caller, method, name string) error {
	params := struct {
		Name string `json:"name"`
	}{name}
	var ok bool
	if err := c.Call(ctx, method, params, &ok); err != nil {
		return err
	}
	if !ok {
		return &ResultError{Method: method, Err: errNotTrue}
	}
	return nil
}
