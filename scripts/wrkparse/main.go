// Command wrkparse is the benchmark scripts' reader of wrk reports and
// writer of summary.csv rows (the schemas of scripts/lab, which
// scripts/plot reads back).
//
//	wrkparse field FILE NAME...           NAME's value(s), one line, space-separated
//	wrkparse header SCHEMA                the CSV header of SCHEMA (summary, ladder, cgi, cold, fixedrate)
//	wrkparse row SCHEMA FILE|- col=val... one CSV row: the wrk columns from FILE
//	                                      (- for none), the rest from col=val
//
// Field names: requests, rps, p50_us, p99_us, max_us, errors, non2xx.
// Latencies are whole µs; a percentile wrk had no sample for is empty.
package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"strings"

	"github.com/twinloop/twinloop/scripts/lab"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "wrkparse:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	usage := fmt.Errorf("usage: wrkparse field FILE NAME... | header SCHEMA | row SCHEMA FILE|- col=value...")
	if len(args) < 2 {
		return usage
	}
	switch args[0] {
	case "field":
		if len(args) < 3 {
			return usage
		}
		rep, err := parseFile(args[1])
		if err != nil {
			return err
		}
		vals := make([]string, 0, len(args)-2)
		for _, name := range args[2:] {
			v, err := rep.Field(name)
			if err != nil {
				return err
			}
			vals = append(vals, v)
		}
		fmt.Println(strings.Join(vals, " "))
		return nil
	case "header", "row":
		schema, ok := lab.Schemas[args[1]]
		if !ok {
			return fmt.Errorf("unknown schema %q (summary, ladder, cgi, cold or fixedrate)", args[1])
		}
		rec := schema
		if args[0] == "row" {
			if len(args) < 3 {
				return usage
			}
			var rep *lab.Report
			if args[2] != "-" {
				r, err := parseFile(args[2])
				if err != nil {
					return err
				}
				rep = &r
			}
			var err error
			if rec, err = lab.Row(schema, rep, args[3:]); err != nil {
				return err
			}
		}
		w := csv.NewWriter(os.Stdout)
		w.Write(rec)
		w.Flush()
		return w.Error()
	}
	return usage
}

func parseFile(name string) (lab.Report, error) {
	f, err := os.Open(name)
	if err != nil {
		return lab.Report{}, err
	}
	defer f.Close()
	rep, err := lab.ParseWrk(f)
	if err != nil {
		return rep, fmt.Errorf("%s: %v", name, err)
	}
	return rep, nil
}
