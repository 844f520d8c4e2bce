package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// Start-time checks that read more than one flag (issue 38): each says
// what to change, as check's own do.

// backendFlags refuses a lab flag that --backend would ignore: an
// io_uring flag (--uring-*) with epoll, poll or blocking, an epoll
// ablation (--epoll-*) with uring, poll or blocking. A flag at its default value is
// no change, and passes. --backend=auto is let through here: which
// backend it takes is known only once it has probed the kernel, and a
// configuration shared by machines with and without io_uring must start
// on both; run warns instead (backendFlagsIgnored).
func (o *options) backendFlags() error {
	if o.Backend == "auto" {
		return nil
	}
	if why, n := o.ignoredBy(o.Backend); n > 0 {
		them := map[bool]string{true: "it", false: "them"}[n == 1]
		return fmt.Errorf("%s; --backend=%s ignores %s: drop %s, or change --backend", why, o.Backend, them, them)
	}
	return nil
}

// backendFlagsIgnored is the warning for --backend=auto when the
// backend it chose ignores some of the flags given, or "".
func (o *options) backendFlagsIgnored(chosen string) string {
	why, n := o.ignoredBy(chosen)
	if n == 0 {
		return ""
	}
	them := map[bool]string{true: "it", false: "them"}[n == 1]
	return fmt.Sprintf("warning: %s; --backend=auto chose %s here, which ignores %s: serving without %s (name the backend to be refused instead of warned)", why, chosen, them, them)
}

// ignoredBy says which flags given (not at their default) backend
// ignores, and which backend each needs, and how many they are.
func (o *options) ignoredBy(backend string) (string, int) {
	var why []string
	n := 0
	if uring := append(changed(o.UringLabFlags), changed(o.UringFeatureFlags)...); backend != "uring" && len(uring) > 0 {
		why = append(why, needs(uring, "--backend=uring (or auto on a kernel that has it)"))
		n += len(uring)
	}
	if epoll := changed(o.EpollLabFlags); backend != "epoll" && len(epoll) > 0 {
		why = append(why, needs(epoll, "--backend=epoll (or auto on a kernel without io_uring)"))
		n += len(epoll)
	}
	return strings.Join(why, "; "), n
}

// changed lists the flags of group, a struct of string flags, whose
// value is not their default, as --name=value.
func changed(group any) []string {
	v := reflect.ValueOf(group)
	var set []string
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if val := v.Field(i).String(); val != f.Tag.Get("default") {
			set = append(set, "--"+f.Tag.Get("long")+"="+val)
		}
	}
	return set
}

func needs(flags []string, what string) string {
	if len(flags) == 1 {
		return flags[0] + " needs " + what
	}
	return strings.Join(flags[:len(flags)-1], ", ") + " and " + flags[len(flags)-1] + " need " + what
}

// errorPageDirs refuses an --error-page whose path is a directory in
// --dir: every error it is for would be answered with the built-in page
// instead (core/errorpage.go: a page that is not a regular file), which
// the operator learns only from a line in the error log at the first
// such error. A page that does not exist yet passes, as in nginx: it may
// be deployed after the server starts, and until then the built-in page
// is sent.
func (o *options) errorPageDirs() error {
	for _, code := range slices.Sorted(maps.Keys(o.errorPages)) {
		p := o.errorPages[code]
		full := filepath.Join(o.Dir, filepath.FromSlash(p))
		if fi, err := os.Stat(full); err == nil && fi.IsDir() {
			return fmt.Errorf("--error-page %d=%s: %s is a directory, and an error page is a file: give one, such as %d=%s/index.html or %d=/%d.html",
				code, p, full, code, strings.TrimSuffix(p, "/"), code, code)
		}
	}
	return nil
}
