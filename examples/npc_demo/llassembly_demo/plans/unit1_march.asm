; HAND-WRITTEN PLAN: written by a person for the demo's bundled replay model, which answers
; the order below with this file. It is not the output of a language model.
; order: Go to 5,5. If you see an enemy on the road, attack him until he is dead, then run to 7,7.
        MOV R1, 5               ; target x
        MOV R2, 5               ; target y
        MOV R9, 0               ; phase: 0 = going to 5,5, 1 = running to 7,7
        MOV R10, 0              ; steps in a row that did not move
walk:
        CALL get_current_position
        POP R3                  ; x
        POP R4                  ; y
        CMP R3, R1
        JNE look
        CMP R4, R2
        JNE look
        CMP R9, 1
        JE done                 ; at 7,7: finished
        MOV R9, 1               ; at 5,5: now run to 7,7
        MOV R1, 7
        MOV R2, 7
        JMP walk
look:
        CMP R9, 1
        JE step                 ; running: no fighting on the way to 7,7
        CALL get_enemies_around
        POP R5                  ; enemy id, 0 = none
        CMP R5, 0
        JE step
fight:
        PUSH R5
        CALL attack_enemy
        POP R6                  ; hit points left; 0 = dead, -1 = no hit
        CMP R6, 0
        JG fight                ; still alive: hit again
step:
        PUSH R1
        PUSH R2
        CALL make_one_step
        POP R7                  ; 1 = moved, 0 = blocked
        CMP R7, 1
        JE moved
        INC R10
        CMP R10, 5
        JGE done                ; stuck five times in a row: give up
        JMP walk
moved:
        MOV R10, 0
        JMP walk
done:
        HLT
