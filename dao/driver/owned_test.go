package driver_test

import (
	"testing"

	"github.com/claimstore/claimstore/dao/driver"
)

type plainModel struct{ ID int64 }

type libraryModel struct{ ID int64 }

func (libraryModel) LibraryTable() bool { return true }

type pointerModel struct{ ID int64 }

func (*pointerModel) LibraryTable() bool { return true }

type declinedModel struct{ ID int64 }

func (declinedModel) LibraryTable() bool { return false }

// TestIsLibraryTable checks the method is found with a value or a pointer
// receiver, and that its answer is kept.
func TestIsLibraryTable(t *testing.T) {
	for name, got := range map[string]bool{
		"plain":    driver.IsLibraryTable[plainModel](),
		"value":    driver.IsLibraryTable[libraryModel](),
		"pointer":  driver.IsLibraryTable[pointerModel](),
		"declined": driver.IsLibraryTable[declinedModel](),
	} {
		want := name == "value" || name == "pointer"
		if got != want {
			t.Errorf("%s: IsLibraryTable = %v, want %v", name, got, want)
		}
	}
}
