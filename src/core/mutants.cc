// See mutants.h. The switch exists only in a mutant build (AGENTPAY_SIM_MUTANTS is defined for
// this file and the swarm command alone, by the CMake option of that name).
#include "core/mutants.h"

namespace agentpay {

#ifdef AGENTPAY_SIM_MUTANTS
namespace {
Mutant active = Mutant::kNone;  // set once, before a simulation runs, by its one thread
}  // namespace

bool MutantActive(Mutant mutant) { return mutant != Mutant::kNone && active == mutant; }
void SetActiveMutant(Mutant mutant) { active = mutant; }
#else
bool MutantActive(Mutant) { return false; }
#endif

}  // namespace agentpay
